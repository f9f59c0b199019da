/**
 * Sharded replicas (active/active): replicas of one operator split the objects of every handled
 * resource among themselves by K virtual shards (ranges of the 64-bit FNV-1a hash of the uid or
 * namespace), with one `coordination.k8s.io/v1` Lease per shard and one membership Lease per
 * replica, all labelled `kopf.dev/shards=<name>`.
 *
 * Each round (every retry period), a replica renews its membership Lease, lists the Leases once,
 * and aims at its fair share: with N live members sorted by identity, the first `K mod N` get
 * `ceil(K/N)` shards, the others `floor(K/N)`. It releases surplus shards and claims free ones.
 *
 * Guarantees:
 * - A shard's claim is valid while its holder's membership is: the holder renews only its
 *   membership Lease (N writes per round, not K). Claims are compare-and-swap writes on the
 *   shard's Lease, so two replicas never both win one; a replica (re)starts a shard only right
 *   after its own successful write.
 * - A replica that cannot renew its membership within the renew deadline stops all its shards at
 *   once; the others take them over only after the lease duration (observed, not by clocks).
 * - A replica releases a shard only after that shard's work has stopped (streams closed, cycles
 *   finished or aborted within the grace periods, daemons and timers stopped); its objects are
 *   released, not deleted: no handler runs for them, no finalizer changes.
 * - On a graceful stop a replica stops its work, releases its shards and deletes its membership,
 *   so the others rebalance within a round or two.
 *
 * Not here: the streams per shard (`reactor/causes/orchestration.ts`), the hash (`structs/shards.ts`).
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import { ApiError } from "../../client/errors.ts";
import { type Lease, LeaseLock, LeaseObserver, LEASES, microTime } from "../../client/leases.ts";
import { checkLeaseTimings, type ShardingSettings } from "../../settings/scaling.ts";
import { checkShardCount, describeShardRange, shardSelector } from "../../structs/shards.ts";
import { sleep } from "../../util/backoff.ts";
import { fnv1a64Hex } from "../../util/fnv1a.ts";

/** The label all Leases of one sharded operator carry (its value: the name prefix). */
export const SHARDS_LABEL = "kopf.dev/shards";
/** The label telling membership Leases (`member`) from shard Leases (`shard`). */
export const ROLE_LABEL = "kopf.dev/lease-role";
/** The annotation with a shard Lease's shard index. */
export const SHARD_ANNOTATION = "kopf.dev/shard";
/** The annotation with the number of shards the operator was configured with. */
export const COUNT_ANNOTATION = "kopf.dev/shard-count";

/** The name of shard `k`'s Lease. */
export function shardLeaseName(prefix: string, shard: number): string {
  return `${prefix}-shard-${shard}`;
}

/** The name of a replica's membership Lease (identities may hold characters names cannot). */
export function memberLeaseName(prefix: string, identity: string): string {
  return `${prefix}-member-${fnv1a64Hex(identity).slice(0, 12)}`;
}

/**
 * How many shards each member aims at: `ceil(K/N)` for the first `K mod N` members by identity,
 * `floor(K/N)` for the rest, so that the targets add up to K exactly.
 * @param members The live members' identities.
 * @param count K.
 * @returns Each member's target.
 */
export function fairShares(members: readonly string[], count: number): Map<string, number> {
  const sorted = [...new Set(members)].sort();
  const base = Math.floor(count / Math.max(sorted.length, 1));
  const extra = count % Math.max(sorted.length, 1);
  return new Map(sorted.map((id, rank) => [id, base + (rank < extra ? 1 : 0)]));
}

/**
 * Whether the API server filters lists and watches by `shardSelector`: a `limit=1` sharded list
 * of Leases (a built-in resource, whose lists echo the applied selector in
 * `metadata.shardInfo`; lists of custom resources are filtered but do not echo it).
 * @param api Object operations.
 * @param namespace Where the operator may list Leases.
 * @param signal Cancels the request.
 * @returns `true` when the server applied the selector.
 */
export async function detectShardedWatches(
  api: KubeApi,
  namespace: string,
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    for await (
      const page of api.listPages(LEASES, {
        namespace,
        limit: 1,
        shardSelector: shardSelector([0], 1, "uid"),
        signal,
      })
    ) {
      const info = (page.metadata as { shardInfo?: { selector?: string } } | undefined)?.shardInfo;
      return Boolean(info?.selector);
    }
  } catch (error) {
    if (error instanceof ApiError && error.code < 500 && error.code !== 403) return false;
    throw error;
  }
  return false;
}

/** What the coordinator needs. */
export interface ShardingDeps {
  /** Object operations. */
  readonly api: KubeApi;
  /** Shard count, key, Lease names and timings. */
  readonly settings: ShardingSettings;
  /** The Leases' namespace (resolved by the caller). */
  readonly namespace: string;
  /** This replica's identity. */
  readonly identity: string;
  /** Where to say what happens. */
  readonly logger: Logger;
  /**
   * Serves exactly these shards from now on; resolves when the work of dropped shards has
   * stopped (the orchestrator's `serveShards`).
   */
  readonly serve: (shards: ReadonlySet<number>) => Promise<void>;
  /** Stops the coordination (the shards are then released). */
  readonly signal: AbortSignal;
}

/** A snapshot of one sharded operator's Leases, for `kopf shards`. */
export interface ShardStatus {
  /** Live members and their shard counts. */
  readonly members: ReadonlyArray<{ identity: string; lease: string; shards: number[] }>;
  /** Every shard with its range and valid holder (`undefined` when free or its holder is gone). */
  readonly shards: ReadonlyArray<{ shard: number; range: string; holder: string | undefined }>;
}

/**
 * Joins the operator's replicas and keeps this replica's fair share of shards served.
 *
 * @example
 * ```ts ignore
 * const coordinator = new ShardCoordinator({ api, settings, namespace, identity, logger,
 *   serve: (shards) => orchestrator.serveShards(shards), signal });
 * await coordinator.join();
 * // ... runs until signal aborts ...
 * await coordinator.finished;
 * ```
 */
export class ShardCoordinator {
  readonly #deps: ShardingDeps;
  readonly #observer = new LeaseObserver();
  readonly #member: LeaseLock;
  #held = new Set<number>();
  #renewedAt = -Infinity;
  #finished: Promise<void> | undefined;
  #warnedCount = false;

  /** @param deps Collaborators. @throws {RangeError} on impossible timings or shard counts. */
  constructor(deps: ShardingDeps) {
    checkLeaseTimings("sharding", deps.settings);
    checkShardCount(deps.settings.shards);
    this.#deps = deps;
    this.#member = new LeaseLock(deps.api, {
      name: memberLeaseName(deps.settings.name, deps.identity),
      namespace: deps.namespace,
      identity: deps.identity,
      leaseDurationSeconds: Math.ceil(deps.settings.leaseDuration),
      labels: { [SHARDS_LABEL]: deps.settings.name, [ROLE_LABEL]: "member" },
    }, this.#observer);
  }

  /** The shards this replica serves now. */
  get held(): ReadonlySet<number> {
    return this.#held;
  }

  /** Resolves when the coordination stopped and the shards were released. */
  get finished(): Promise<void> {
    return this.#finished ?? Promise.resolve();
  }

  /**
   * Announces this replica, waits one retry period so that replicas starting together see each
   * other, takes the first fair share, then keeps balancing in the background.
   * @returns Resolves after the first round (the shards it holds are served by then).
   */
  async join(): Promise<void> {
    const { settings, signal } = this.#deps;
    while (!signal.aborted && !(await this.#renewMembership())) {
      await sleep(settings.retryPeriod * 1000, signal).catch(() => {});
    }
    // Renewals run on their own, so that a long stop of released shards never delays them.
    const renewing = this.#every(() => this.#renewMembership());
    await sleep(settings.retryPeriod * 1000, signal).catch(() => {});
    if (!signal.aborted) await this.#round().catch((error) => this.#report(error));
    const balancing = this.#every(() => this.#round());
    this.#finished = Promise.all([renewing, balancing]).then(() => this.#leave());
  }

  async #every(step: () => Promise<unknown>): Promise<void> {
    const { settings, signal } = this.#deps;
    while (!signal.aborted) {
      const ms = settings.retryPeriod * 1000 * (0.9 + Math.random() * 0.2);
      await sleep(ms, signal).catch(() => {});
      if (signal.aborted) break;
      await step().catch((error) => this.#report(error));
    }
  }

  /** Whether the membership was renewed within the renew deadline (claims are safe). */
  #fresh(): boolean {
    return performance.now() - this.#renewedAt < this.#deps.settings.renewDeadline * 1000;
  }

  #report(error: unknown): void {
    if (this.#deps.signal.aborted) return;
    this.#deps.logger.warning(`Sharding round failed (retrying): ${firstLine(error)}`);
  }

  /** Renews the membership; after the renew deadline without success, stops every shard. */
  async #renewMembership(): Promise<boolean> {
    const { settings, logger } = this.#deps;
    try {
      // While shards are held, an attempt may take only what is left of the renew deadline.
      // Past it (no shards held any more), a full deadline: an attempt cut after 1 ms could
      // never succeed, and the replica would stay out for good (found by the 10,000-object
      // scale-out bench, where an overloaded API server made one renewal late).
      const left = settings.renewDeadline * 1000 - (performance.now() - this.#renewedAt);
      const timeoutMs = Number.isFinite(left) && left > 0 ? left : settings.renewDeadline * 1000;
      const attempt = await this.#member.tryAcquireOrRenew({
        signal: AbortSignal.any([this.#deps.signal, AbortSignal.timeout(timeoutMs)]),
      });
      if (attempt.state === "held") {
        this.#renewedAt = performance.now();
        return true;
      }
    } catch (error) {
      if (this.#deps.signal.aborted) return false;
      logger.warning(`Cannot renew the shard membership: ${firstLine(error)}`);
    }
    if (this.#held.size && performance.now() - this.#renewedAt >= settings.renewDeadline * 1000) {
      logger.error(
        `Shard membership not renewed within ${settings.renewDeadline}s: stopping all ` +
          `${this.#held.size} shards now`,
      );
      this.#held = new Set();
      await this.#deps.serve(this.#held);
    }
    return false;
  }

  async #round(): Promise<void> {
    const { api, settings, namespace, identity, logger, signal } = this.#deps;
    if (!this.#fresh()) return;
    const { items } = await api.list<Lease>(LEASES, {
      namespace,
      labelSelector: `${SHARDS_LABEL}=${settings.name}`,
      signal,
    });
    const members = new Set<string>();
    const shardLeases = new Map<number, Lease>();
    for (const lease of items) {
      this.#observer.observe(lease);
      const name = lease.metadata?.name ?? "";
      const role = lease.metadata?.labels?.[ROLE_LABEL];
      if (role === "member") {
        const holder = this.#observer.holder(name);
        if (holder) members.add(holder);
        else if (this.#observer.age(name) > settings.leaseDuration * 4000) {
          // A member that died without leaving: tidy up (only if nobody renewed it meanwhile).
          await api.delete(LEASES, name, {
            namespace,
            preconditions: { resourceVersion: lease.metadata?.resourceVersion ?? "" },
            signal,
          }).catch(() => {});
        }
      } else if (role === "shard") {
        const shard = Number(lease.metadata?.annotations?.[SHARD_ANNOTATION]);
        const count = Number(lease.metadata?.annotations?.[COUNT_ANNOTATION]);
        if (count !== settings.shards && !this.#warnedCount) {
          this.#warnedCount = true;
          logger.error(
            `Shard Lease ${name} was written for ${count} shards, but this replica has ` +
              `${settings.shards}: all replicas of an operator must use the same shard count`,
          );
        }
        if (Number.isInteger(shard) && shard < settings.shards) shardLeases.set(shard, lease);
      }
    }
    members.add(identity);
    const validHolder = (shard: number) => {
      const holder = shardLeases.get(shard)?.spec?.holderIdentity || undefined;
      return holder && members.has(holder) ? holder : undefined;
    };

    // Shards taken from us (only if we were considered dead): stop them at once.
    const lost = [...this.#held].filter((k) => validHolder(k) !== identity);
    if (lost.length) {
      logger.error(`Shards ${lost.join(", ")} are held by others now: stopping them`);
      for (const k of lost) this.#held.delete(k);
      await this.#deps.serve(new Set(this.#held));
    }

    const target = fairShares([...members], settings.shards).get(identity) ?? 0;
    if (this.#held.size > target) {
      const surplus = [...this.#held].sort((a, b) => b - a).slice(0, this.#held.size - target);
      for (const k of surplus) this.#held.delete(k);
      await this.#deps.serve(new Set(this.#held)); // their work stops before the release
      for (const k of surplus) {
        const lease = shardLeases.get(k);
        if (lease) await this.#writeShard(k, lease, "").catch(() => {});
      }
      logger.info(
        `Released shards ${surplus.join(", ")} for other replicas; serving ${this.#held.size} ` +
          `of ${settings.shards} with ${members.size} replicas`,
      );
    } else if (this.#held.size < target) {
      // Each replica tries the free shards in its own order, so that joiners rarely collide.
      const free = [...Array(settings.shards).keys()]
        .filter((k) => !this.#held.has(k))
        .filter((k) => validHolder(k) === undefined || validHolder(k) === identity)
        .sort((a, b) =>
          fnv1a64Hex(`${identity}/${a}`).localeCompare(fnv1a64Hex(`${identity}/${b}`))
        );
      const claimed: number[] = [];
      for (const k of free.slice(0, target - this.#held.size)) {
        if (signal.aborted) break;
        const written = await this.#writeShard(k, shardLeases.get(k), identity).catch((error) => {
          logger.warning(`Cannot claim shard ${k}: ${firstLine(error)}`);
          return false;
        });
        if (written) claimed.push(k);
      }
      if (claimed.length && !this.#fresh()) {
        // The membership lapsed meanwhile: the claims name us but must not be served; the next
        // rounds re-claim them with a new write once the membership is renewed.
        claimed.length = 0;
      }
      if (claimed.length) {
        for (const k of claimed) this.#held.add(k);
        await this.#deps.serve(new Set(this.#held));
        logger.info(
          `Claimed shards ${claimed.join(", ")}; serving ${this.#held.size} of ` +
            `${settings.shards} with ${members.size} replicas`,
        );
      }
    }
  }

  /** Compare-and-swap of a shard's Lease (create if missing); `holder` "" releases it. */
  async #writeShard(shard: number, lease: Lease | undefined, holder: string): Promise<boolean> {
    const { api, settings, namespace, signal } = this.#deps;
    const now = microTime(new Date());
    const previous = lease?.spec ?? {};
    const spec = {
      holderIdentity: holder,
      leaseDurationSeconds: Math.ceil(settings.leaseDuration),
      acquireTime: holder ? now : null,
      renewTime: now,
      leaseTransitions: (previous.leaseTransitions ?? 0) +
        (holder && previous.holderIdentity !== holder ? 1 : 0),
    };
    try {
      if (!lease) {
        await api.create<Lease>(LEASES, {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: {
            name: shardLeaseName(settings.name, shard),
            namespace,
            labels: { [SHARDS_LABEL]: settings.name, [ROLE_LABEL]: "shard" },
            annotations: {
              [SHARD_ANNOTATION]: String(shard),
              [COUNT_ANNOTATION]: String(settings.shards),
              "kopf.dev/shard-range": describeShardRange(shard, settings.shards),
            },
          },
          spec,
        }, { namespace, signal });
      } else {
        await api.replace<Lease>(LEASES, lease.metadata?.name ?? "", { ...lease, spec }, {
          namespace,
          signal,
        });
      }
      return true;
    } catch (error) {
      if (error instanceof ApiError && (error.code === 409 || error.code === 404)) return false;
      throw error;
    }
  }

  /** Stops all work, releases the shards, and deletes the membership. */
  async #leave(): Promise<void> {
    const { api, settings, namespace, identity, logger } = this.#deps;
    const held = [...this.#held];
    this.#held = new Set();
    await this.#deps.serve(this.#held);
    const signal = AbortSignal.timeout(5_000);
    try {
      const { items } = await api.list<Lease>(LEASES, {
        namespace,
        labelSelector: `${SHARDS_LABEL}=${settings.name}`,
        signal,
      });
      for (const lease of items) {
        if (lease.metadata?.labels?.[ROLE_LABEL] !== "shard") continue;
        if (lease.spec?.holderIdentity !== identity) continue;
        const shard = Number(lease.metadata?.annotations?.[SHARD_ANNOTATION]);
        await this.#writeShardOnExit(shard, lease, signal);
      }
      await api.delete(LEASES, this.#member.name, { namespace, signal }).catch(() => {});
      if (held.length) logger.info(`Released shards ${held.join(", ")} and left.`);
    } catch (error) {
      logger.warning(`Cannot release the shards on exit (they expire): ${firstLine(error)}`);
    }
  }

  async #writeShardOnExit(shard: number, lease: Lease, signal: AbortSignal): Promise<void> {
    const { api, settings, namespace } = this.#deps;
    const spec = {
      ...lease.spec,
      holderIdentity: "",
      acquireTime: null,
      renewTime: microTime(new Date()),
    };
    await api.replace(LEASES, shardLeaseName(settings.name, shard), { ...lease, spec }, {
      namespace,
      signal,
    }).catch(() => {});
  }
}

/**
 * Reads who holds which shards (for `kopf shards`), judging liveness by the membership Leases'
 * renew times (a one-off reader cannot observe changes over time).
 * @param api Object operations.
 * @param options The Leases' name prefix and namespace.
 * @returns The members and the shards.
 */
export async function readShardStatus(
  api: KubeApi,
  options: { name: string; namespace: string; signal?: AbortSignal },
): Promise<ShardStatus & { count: number | undefined }> {
  const { items } = await api.list<Lease>(LEASES, {
    namespace: options.namespace,
    labelSelector: `${SHARDS_LABEL}=${options.name}`,
    signal: options.signal,
  });
  const now = Date.now();
  const alive = new Map<string, string>();
  const shards: Array<{ shard: number; range: string; holder: string | undefined }> = [];
  let count: number | undefined;
  for (const lease of items) {
    const spec = lease.spec ?? {};
    const role = lease.metadata?.labels?.[ROLE_LABEL];
    if (role === "member") {
      const renewed = Date.parse(spec.renewTime ?? "");
      const fresh = now - renewed <= (spec.leaseDurationSeconds ?? 0) * 1000;
      if (spec.holderIdentity && fresh) alive.set(spec.holderIdentity, lease.metadata?.name ?? "");
    } else if (role === "shard") {
      count = Number(lease.metadata?.annotations?.[COUNT_ANNOTATION]) || count;
    }
  }
  for (const lease of items) {
    if (lease.metadata?.labels?.[ROLE_LABEL] !== "shard") continue;
    const shard = Number(lease.metadata?.annotations?.[SHARD_ANNOTATION]);
    const holder = lease.spec?.holderIdentity || undefined;
    shards.push({
      shard,
      range: count ? describeShardRange(shard, count) : "?",
      holder: holder && alive.has(holder) ? holder : undefined,
    });
  }
  shards.sort((a, b) => a.shard - b.shard);
  const members = [...alive].map(([identity, lease]) => ({
    identity,
    lease,
    shards: shards.filter((s) => s.holder === identity).map((s) => s.shard),
  })).sort((a, b) => a.identity.localeCompare(b.identity));
  return { members, shards, count };
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}
