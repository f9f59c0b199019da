/**
 * Settings of the scale-out features: `settings.leadership` (active/standby leader election on
 * a Lease) and `settings.sharding` (active/active replicas that split the objects by hash).
 * Both are off by default, as Kopf has neither. Defaults of the timings are controller-runtime's.
 * @module
 */

import type { ShardKey } from "../structs/shards.ts";

/** `settings.leadership`: leader election on a `coordination.k8s.io/v1` Lease. */
export interface LeadershipSettings {
  /** Elect a leader; only the leader watches and handles. (`kopf run --leader-elect`) @default false */
  enabled: boolean;
  /** The Lease's name. @default "kopf-leader" */
  name: string;
  /**
   * The Lease's namespace; `null`: the operator's namespace (the service account's, or the
   * kubeconfig context's), else `default`. @default null
   */
  namespace: string | null;
  /**
   * This replica's holder identity; `null`: `POD_NAME`, else `POD_ID`, else the host name, each
   * with a random suffix (as controller-runtime). @default null
   */
  identity: string | null;
  /** Seconds a claim lasts; a standby takes over this long after the leader's last renewal. @default 15 */
  leaseDuration: number;
  /** Seconds the leader keeps trying to renew before it stops handling. @default 10 */
  renewDeadline: number;
  /** Seconds between attempts to acquire or renew. @default 2 */
  retryPeriod: number;
  /**
   * What a leader does when it cannot renew before the deadline (after it stopped all handling
   * at once): `"exit"` the operator with an error (controller-runtime's behaviour; the pod
   * restarts) or go back to `"standby"` and compete again. @default "exit"
   */
  onLost: "exit" | "standby";
}

/** `settings.sharding`: replicas that split every handled resource's objects among them. */
export interface ShardingSettings {
  /** Split the objects among replicas by shard Leases. (`kopf run --shards`) @default false */
  enabled: boolean;
  /**
   * Virtual shards (ranges of the 64-bit hash space), one Lease each; fixed for an operator:
   * all replicas must agree. More shards spread better; each held shard is one watch per
   * resource. @default 32
   */
  shards: number;
  /**
   * What is hashed: `"uid"` spreads objects evenly; `"namespace"` keeps each namespace on one
   * replica. Cluster-scoped resources are always sharded by uid. @default "uid"
   */
  key: ShardKey;
  /** Prefix of the Lease names (`<name>-shard-<k>`, `<name>-member-<hash>`). @default "kopf" */
  name: string;
  /** The Leases' namespace; `null`: as for `leadership.namespace`. @default null */
  namespace: string | null;
  /** This replica's identity; `null`: as for `leadership.identity`. @default null */
  identity: string | null;
  /** Seconds a replica's membership lasts after each renewal. @default 15 */
  leaseDuration: number;
  /** Seconds a replica keeps trying to renew before it stops all its shards. @default 10 */
  renewDeadline: number;
  /** Seconds between rounds (renew, rebalance). @default 2 */
  retryPeriod: number;
  /**
   * Use the API server's sharded list and watch (`shardSelector`, Kubernetes 1.36+ with the
   * `ShardedListAndWatch` gate): `"auto"` detects it once at startup; `"never"` filters on the
   * client only. Objects are always filtered on the client too. @default "auto"
   */
  serverSide: "auto" | "never";
}

/**
 * Leadership settings with defaults.
 * @param overrides Fields to change.
 * @returns A fresh section.
 */
export function leadershipDefaults(
  overrides: Partial<LeadershipSettings> = {},
): LeadershipSettings {
  return {
    enabled: false,
    name: "kopf-leader",
    namespace: null,
    identity: null,
    leaseDuration: 15,
    renewDeadline: 10,
    retryPeriod: 2,
    onLost: "exit",
    ...overrides,
  };
}

/**
 * Sharding settings with defaults.
 * @param overrides Fields to change.
 * @returns A fresh section.
 */
export function shardingDefaults(overrides: Partial<ShardingSettings> = {}): ShardingSettings {
  return {
    enabled: false,
    shards: 32,
    key: "uid",
    name: "kopf",
    namespace: null,
    identity: null,
    leaseDuration: 15,
    renewDeadline: 10,
    retryPeriod: 2,
    serverSide: "auto",
    ...overrides,
  };
}

/**
 * Checks that the timings can keep the guarantee "the old holder stops before another starts".
 * @param what `leadership` or `sharding`, for the message.
 * @param s The timings.
 * @throws {RangeError} when `retryPeriod < renewDeadline < leaseDuration` does not hold.
 */
export function checkLeaseTimings(
  what: string,
  s: { leaseDuration: number; renewDeadline: number; retryPeriod: number },
): void {
  if (
    !(s.retryPeriod > 0 && s.retryPeriod < s.renewDeadline && s.renewDeadline < s.leaseDuration)
  ) {
    throw new RangeError(
      `settings.${what} needs 0 < retryPeriod < renewDeadline < leaseDuration, got ` +
        `${s.retryPeriod} < ${s.renewDeadline} < ${s.leaseDuration}`,
    );
  }
}
