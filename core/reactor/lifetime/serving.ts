/**
 * One term of service: from joining the peers (or the shard Leases) to a clean stop. The
 * operator serves one term, or with leader election one per won Lease (`coordinating.ts`).
 *
 * A term is a list of parts (`parts.ts`), started in order: peering, the Events poster, the
 * shared informer cache (for reconcile handlers), the shard coordinator, the webhook server, and
 * the orchestration of watch streams with the reconcile controllers. They stop by named groups
 * in the order of `stopping.ts` (workers, reporting, intake, coordination, caches, presence).
 * @module
 */

import type { Lifecycle } from "../../actions/lifecycles.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { startAdmission } from "../../engines/admission/admission.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import {
  detectIdentity,
  OperatorPause,
  type PeeringRun,
  startPeering,
} from "../../engines/coordination/peering.ts";
import { type EventPoster, withPoster } from "../../engines/observability/posting.ts";
import { ShardCoordinator } from "../../engines/coordination/sharding.ts";
import type { Memo } from "../../intents/contexts.ts";
import type { OperatorRegistry } from "../../intents/registries.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import type { NamespacePattern } from "../../structs/namespaces.ts";
import type { Sharding } from "./coordinating.ts";
import { firstLine, OperatorStartError } from "./errors.ts";
import { type OperatorStats, Orchestrator } from "../causes/orchestration.ts";
import { ReconcileControllers } from "../reconcile/reconciling.ts";
import type { SharedInformers } from "../streams/sharing.ts";
import { operatorScope } from "../scope/scope.ts";
import { aborted, disposedPart, type Part, runningPart, runParts } from "../../util/parts.ts";
import { termGroups } from "./stopping.ts";

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
  /**
   * Told, as the term starts, what of the term's parts that should run does not (the liveness
   * endpoint answers 503 with it): undefined while all run.
   */
  readonly onProblems: (problems: () => string | undefined) => void;
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
  const { registry, settings, logger, sharding } = deps;
  const pause = new OperatorPause();
  deps.onPause(pause);
  // A part that stopped on its own while the term should run (reported by the liveness endpoint).
  let missing: string | undefined;
  deps.onProblems(() => missing);
  // Started in this order; stopped by groups in the order of termGroups() (stopping.ts), on
  // every exit path: a start that fails half-way stops what it already started.
  await runParts({
    signal,
    groups: termGroups(settings),
    onFailure: deps.onFailure,
    onMissing: (why) => missing ??= why,
    onStopping: () => logger.info("Stop requested; finishing the current cycles."),
  }, async (parts) => {
    const peering = peeringPart(deps, pause, signal);
    await parts.start(peering);
    await parts.start(runningPart("the Events poster", "reporting", (s) => deps.poster.run(s)));
    const built = buildTermParts(deps, parts.signal, peering.run, pause, halt);
    const { shared, orchestrator, reconcilers } = built;
    deps.onServing(orchestrator);
    if (shared) await parts.start(disposedPart("the informer cache", "caches", shared));
    if (sharding) await parts.start(shardsPart(deps, sharding, orchestrator, reconcilers));
    deps.observe?.(() => orchestrator.stats());
    if (registry.webhooks().length) await parts.start(webhooksPart(deps, orchestrator, signal));
    await parts.start(runningPart("the orchestration", "workers", () =>
      withPoster(
        deps.poster,
        () => Promise.all([orchestrator.run(), reconcilers?.run()]).then(() => {}),
      )));
  });
}

/** The term's readers and workers, as one term builds them. */
interface TermParts {
  /** The informer cache for the reconcile handlers, if any. */
  readonly shared: SharedInformers | undefined;
  /** The orchestration of the watch streams. */
  readonly orchestrator: Orchestrator;
  /** The reconcile controllers, if any. */
  readonly reconcilers: ReconcileControllers | undefined;
}

/**
 * Builds the term's informer cache, orchestrator and reconcile controllers (not started).
 * @param deps The operator's parts.
 * @param term The term's stop signal.
 * @param peering The term's peering, if peering is on (then the pause switch is honoured).
 * @param pause The term's pause switch.
 * @param halt Aborts on a lost Lease.
 * @returns The built parts.
 */
function buildTermParts(
  deps: ServingDeps,
  term: AbortSignal,
  peering: unknown,
  pause: OperatorPause,
  halt: AbortSignal | undefined,
): TermParts {
  const { client, registry, settings, logger, memo, namespaces, clusterwide, sharding } = deps;
  // The term's scope, built once: what every stream, cycle and reconcile reads, with one
  // informer cache for the reconcile handlers and whatever else reads their resources.
  const scope = operatorScope({
    client,
    registry,
    settings,
    logger,
    memo,
    lifecycle: deps.lifecycle,
    observer: deps.observer,
    pause: peering ? pause : undefined,
    namespaces,
    clusterwide,
    sharding: sharding?.space,
    signal: term,
    halt,
  });
  const shared = scope.shared;
  const orchestrator = new Orchestrator(scope, {
    onReady: deps.onReady,
    onFailure: deps.onFailure,
  });
  // Level-based reconcile handlers run beside the reactor, over the shared cache.
  const reconcilers = shared ? new ReconcileControllers(scope) : undefined;
  return { shared, orchestrator, reconcilers };
}

/**
 * Peering as a part: started once the peering mode is detected (standalone: nothing runs, and
 * the part waits for its stop). Its stop signal is the operator's stop (or a lost Lease) as well
 * as its turn: a start that fails half-way does not tell it before its turn.
 * @param deps The operator's parts.
 * @param pause The term's pause switch.
 * @param signal The term's outer signal: the operator's stop, or a lost Lease.
 * @returns The part, and once ready, the running peering (none when standalone).
 */
function peeringPart(
  deps: ServingDeps,
  pause: OperatorPause,
  signal: AbortSignal,
): Part & { run: PeeringRun | undefined } {
  const { client, settings, logger, namespaces } = deps;
  const part: Part & { run: PeeringRun | undefined } = {
    name: "peering",
    group: "presence",
    run: undefined,
    start: (turn) => {
      const stop = AbortSignal.any([signal, turn]);
      const ready = startPeering({
        api: client.api,
        settings: settings.peering,
        watching: settings.watching,
        identity: deps.identity ?? detectIdentity(),
        namespaces,
        pause,
        logger: logger.child(["kopf", "peering"]),
        signal: stop,
        exitTimeout: settings.process.gracePeriod,
      }).then((run) => {
        part.run = run;
      }, (error) => {
        if (signal.aborted) throw error;
        throw new OperatorStartError(`Cannot start peering: ${firstLine(error)}`, {
          cause: error,
        });
      });
      return { ready, finished: ready.then(() => part.run?.finished ?? aborted(stop)) };
    },
  };
  return part;
}

/**
 * The shard coordinator as a part: ready once it joined (the first fair share is served from the
 * first listing); finished once the shards' work stopped and their Leases are released.
 * @param deps The operator's parts.
 * @param sharding The sharding setup.
 * @param orchestrator The term's orchestrator, which serves the held shards.
 * @param reconcilers The term's reconcile controllers, if any, which serve them too.
 * @returns The part.
 */
function shardsPart(
  deps: ServingDeps,
  sharding: Sharding,
  orchestrator: Orchestrator,
  reconcilers: ReconcileControllers | undefined,
): Part {
  return {
    name: "the shard coordinator",
    group: "coordination",
    start: (signal) => {
      const coordinator = new ShardCoordinator({
        ...sharding.deps,
        serve: (shards) => {
          deps.observer?.state("shards_owned", shards.size, {
            name: deps.settings.sharding.name,
          });
          return Promise.all([
            orchestrator.serveShards(shards),
            reconcilers?.serveShards(shards),
          ]).then(() => {});
        },
        signal,
      });
      const ready = coordinator.join();
      return { ready, finished: ready.then(() => coordinator.finished) };
    },
  };
}

/**
 * The webhook server as a part, with a stop signal of its own that follows the term's only
 * while the server runs. A server that already stopped by itself (a start that failed after
 * binding its port, e.g. when the webhook configurations cannot be written) has shut its
 * listener down: `Deno.serve` would shut it down again when a signal it was given aborts later,
 * and that second close crashes the process with `Uncaught BadResource` (e.g. on Ctrl-C).
 * @param deps The operator's parts.
 * @param orchestrator The term's orchestrator (memos and indices for the handlers).
 * @param signal The term's outer signal: a start cut short by it is no start failure.
 * @returns The part: ready once the server listens and its configurations are in place.
 */
function webhooksPart(deps: ServingDeps, orchestrator: Orchestrator, signal: AbortSignal): Part {
  const { client, registry, settings, logger, memo } = deps;
  return {
    name: "the webhook server",
    group: "intake",
    start: (term) => {
      const own = new AbortController();
      const forward = () => own.abort(term.reason);
      if (term.aborted) forward();
      else term.addEventListener("abort", forward, { once: true });
      const admission = startAdmission({
        client,
        registry,
        settings,
        logger,
        memo,
        memoOf: (uid: string) => orchestrator.memoOf(uid),
        indices: orchestrator.indices,
        signal: own.signal,
      });
      const ended = () => term.removeEventListener("abort", forward);
      admission.finished.then(ended, ended);
      const failed = (error: unknown) =>
        new OperatorStartError(`Cannot serve the admission webhooks: ${error}`, { cause: error });
      let started = false;
      const ready = admission.ready.then(() => void (started = true), (error) => {
        if (signal.aborted) return;
        throw failed(error);
      });
      // A start that failed while a stop was asked for (a signal just after the failure) still
      // ends as that start failure, not as the bare error of the server's end.
      const finished = admission.finished.catch((error) => {
        throw started ? error : failed(error);
      });
      return { ready, finished };
    },
  };
}
