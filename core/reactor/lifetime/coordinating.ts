/**
 * How replicas of one operator share the work: leader election (one replica serves, the others
 * stand by for its Lease) or sharding (all serve, each its shards); never both.
 *
 * Not here: what one term of service runs (`serving.ts`), the Leases themselves
 * (`core/engines/coordination/leadership.ts`, `core/engines/coordination/sharding.ts`).
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import {
  LeaderElector,
  leaseNamespace,
  replicaIdentity,
} from "../../engines/coordination/leadership.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import { detectShardedWatches, type ShardingDeps } from "../../engines/coordination/sharding.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { firstLine, OperatorStartError } from "./errors.ts";
import type { ShardSpace } from "../../structs/shards.ts";
import type { Part } from "../../util/parts.ts";

/** A sharded replica's setup. */
export interface Sharding {
  /** How objects are split into shards, for the orchestrator and the reconcilers. */
  readonly space: ShardSpace;
  /** The shard coordinator's dependencies, but what it serves and its signal. */
  readonly deps: Omit<ShardingDeps, "serve" | "signal">;
}

/** How this replica shares the work; neither for a single replica. */
export interface Coordination {
  /** The sharding setup, when `settings.sharding.enabled`. */
  readonly sharding: Sharding | undefined;
  /** The Lease's contender, when `settings.leadership.enabled`. */
  readonly leader: LeaderElector | undefined;
}

/**
 * Prepares leader election or sharding, as the settings ask.
 * @param client The connected client (the Leases' default namespace is its namespace).
 * @param settings The operator's settings (`leadership`, `sharding`; sharding turns peering off).
 * @param logger Operator logger; the parts log on its `kopf.sharding` / `kopf.leadership` children.
 * @param signal Stops the detection of sharded watches.
 * @returns The sharding setup and the leader elector, each if enabled.
 * @throws {OperatorStartError} when both are enabled, or the shard Leases cannot be listed.
 */
export async function startCoordination(
  client: KubeClient,
  settings: OperatorSettings,
  logger: Logger,
  signal: AbortSignal,
): Promise<Coordination> {
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
  return { sharding, leader };
}

/**
 * Serves in terms until stopped: without a leader, one term; with one, standby → leading → (on
 * a lost Lease: exit, or standby again).
 * @param leader The Lease's contender, if leader election is enabled.
 * @param settings The operator's settings (`leadership.name`, `leadership.onLost`).
 * @param observer Told whether this replica leads, if observed.
 * @param signal Stops the operator.
 * @param serve Serves one term until its signal aborts; `halt` aborts on a lost Lease.
 * @returns Resolves after the last term.
 * @throws the Lease's loss when `settings.leadership.onLost` is `"exit"`.
 */
export async function serveTerms(
  leader: LeaderElector | undefined,
  settings: OperatorSettings,
  observer: OperatorObserver | undefined,
  signal: AbortSignal,
  serve: (signal: AbortSignal, halt?: AbortSignal) => Promise<void>,
): Promise<void> {
  const leaseLabels = { name: settings.leadership.name };
  if (leader) observer?.state("leader", 0, leaseLabels);
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
}

/**
 * The terms of service as a part (`core/util/parts.ts`, in the operator's first stop group): ready
 * at once (a standby waits for the Lease as it serves), finished after the last term. The terms
 * are the operator's life: when they end by themselves — a term that fails to start, a lost Lease
 * with `onLost: "exit"` — `over` is told before the part settles, so the operator stops (its
 * endpoints, then its connection) and fails with the terms' error rather than naming a missing
 * part or logging it once more.
 * @param leader The Lease's contender, if leader election is enabled.
 * @param settings The operator's settings (`leadership.name`, `leadership.onLost`).
 * @param observer Told whether this replica leads, if observed.
 * @param serve Serves one term until its signal aborts; `halt` aborts on a lost Lease.
 * @param over Told when the terms are over, whatever ended them: stops the operator.
 * @returns The part, in the `terms` stop group.
 */
export function termsPart(
  leader: LeaderElector | undefined,
  settings: OperatorSettings,
  observer: OperatorObserver | undefined,
  serve: (signal: AbortSignal, halt?: AbortSignal) => Promise<void>,
  over: () => void,
): Part {
  return {
    name: "the terms of service",
    group: "terms",
    start: (signal) => ({
      ready: Promise.resolve(),
      finished: serveTerms(leader, settings, observer, signal, serve).finally(over),
    }),
  };
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
): Promise<Sharding> {
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
