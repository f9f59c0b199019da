/**
 * `coordination.k8s.io/v1` Leases as a lock, with client-go's semantics: a holder renews its
 * Lease; anyone may take a Lease that is free (empty holder) or expired; updates are
 * compare-and-swap on the resourceVersion, so two contenders can never both win.
 *
 * Expiry is judged by *observation*, not by the timestamps inside the Lease (as client-go does):
 * a Lease is expired when its record has not changed for `leaseDurationSeconds` since this
 * process first saw that record, so clock skew between replicas does not matter.
 *
 * Used by the leader election (`engines/coordination/leadership.ts`) and the shard Leases
 * (`engines/coordination/sharding.ts`). Nothing here decides *when* to renew: callers run the loop.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import type { KubeApi } from "./api.ts";
import { ApiError } from "./errors.ts";

/** The `coordination.k8s.io/v1` Lease resource. */
export const LEASES: Resource = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  singular: "lease",
  kind: "Lease",
  namespaced: true,
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

/** The `spec` of a Lease. */
export interface LeaseSpec {
  /** Who holds it; empty or missing when free. */
  holderIdentity?: string | null;
  /** How long the holder's claim lasts after each renewal. */
  leaseDurationSeconds?: number | null;
  /** When the current holder acquired it (RFC 3339 with microseconds). */
  acquireTime?: string | null;
  /** When the current holder last renewed it. */
  renewTime?: string | null;
  /** How many times it changed hands. */
  leaseTransitions?: number | null;
}

/** A Lease object. */
export interface Lease extends KubeObject {
  /** The lock's state. */
  spec?: LeaseSpec;
}

/**
 * A time as Kubernetes' MicroTime: RFC 3339 with six fractional digits.
 * @param date The time.
 * @returns E.g. `2026-01-02T03:04:05.678000Z`.
 */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Where a Lease lives and how it is labelled. */
export interface LeaseLockOptions {
  /** The Lease's name. */
  readonly name: string;
  /** The Lease's namespace. */
  readonly namespace: string;
  /** This contender's identity (the holder identity it writes). */
  readonly identity: string;
  /** Seconds a claim lasts after each renewal. */
  readonly leaseDurationSeconds: number;
  /** Labels for a Lease this lock creates (e.g. to list a group of Leases). */
  readonly labels?: Readonly<Record<string, string>> | undefined;
  /** Annotations for a Lease this lock creates. */
  readonly annotations?: Readonly<Record<string, string>> | undefined;
  /** The monotonic clock, in milliseconds (for tests). @default performance.now */
  readonly now?: (() => number) | undefined;
}

/** What a Lease looked like when last read, and when this process first saw that record. */
interface Observation {
  readonly lease: Lease;
  readonly record: string;
  readonly at: number;
}

/**
 * Remembers when each Lease record was first seen, to judge expiry by observation.
 *
 * @example
 * ```ts
 * import { LeaseObserver } from "./leases.ts";
 * const observer = new LeaseObserver();
 * observer.observe({ metadata: { name: "a" }, spec: { holderIdentity: "x", leaseDurationSeconds: 15 } });
 * observer.expired("a"); // false: just seen
 * ```
 */
export class LeaseObserver {
  #seen = new Map<string, Observation>();
  #now: () => number;

  /** @param now The monotonic clock in milliseconds. @default performance.now */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /**
   * Records a Lease as just read (a changed record restarts its expiry).
   * @param lease The Lease.
   */
  observe(lease: Lease): void {
    const name = lease.metadata?.name ?? "";
    const record = JSON.stringify(lease.spec ?? {});
    const before = this.#seen.get(name);
    if (before?.record === record) this.#seen.set(name, { ...before, lease });
    else this.#seen.set(name, { lease, record, at: this.#now() });
  }

  /**
   * Forgets a Lease (deleted, or no longer of interest).
   * @param name The Lease's name.
   */
  forget(name: string): void {
    this.#seen.delete(name);
  }

  /**
   * The holder of a Lease if its claim is still valid: non-empty and renewed within its
   * duration as observed here.
   * @param name The Lease's name.
   * @returns The holder identity, or `undefined` when free, expired or never seen.
   */
  holder(name: string): string | undefined {
    const seen = this.#seen.get(name);
    const holder = seen?.lease.spec?.holderIdentity;
    if (!seen || !holder) return undefined;
    return this.expired(name) ? undefined : holder;
  }

  /**
   * Whether the claim in a Lease has lapsed: its record unchanged for longer than its duration.
   * @param name The Lease's name.
   * @returns `true` when expired (or never seen), `false` while valid.
   */
  expired(name: string): boolean {
    const seen = this.#seen.get(name);
    if (!seen) return true;
    const duration = (seen.lease.spec?.leaseDurationSeconds ?? 0) * 1000;
    return this.#now() - seen.at > duration;
  }

  /**
   * Milliseconds since the Lease's current record was first seen.
   * @param name The Lease's name.
   * @returns The age, or `Infinity` when never seen.
   */
  age(name: string): number {
    const seen = this.#seen.get(name);
    return seen ? this.#now() - seen.at : Infinity;
  }

  /**
   * The Lease as last read.
   * @param name The Lease's name.
   * @returns The Lease, or `undefined` when never seen.
   */
  lease(name: string): Lease | undefined {
    return this.#seen.get(name)?.lease;
  }
}

/** What {@link LeaseLock.tryAcquireOrRenew} found. */
export type LeaseAttempt =
  | { readonly state: "held"; readonly lease: Lease; readonly transitioned: boolean }
  | { readonly state: "taken"; readonly holder: string }
  | { readonly state: "conflict" };

/**
 * One Lease used as a lock by one contender.
 *
 * @example
 * ```ts ignore
 * const lock = new LeaseLock(client.api, {
 *   name: "my-operator", namespace: "default", identity: "pod-1", leaseDurationSeconds: 15,
 * });
 * const attempt = await lock.tryAcquireOrRenew();
 * if (attempt.state === "held") console.log("leading");
 * await lock.release();
 * ```
 */
export class LeaseLock {
  readonly #api: KubeApi;
  readonly #options: LeaseLockOptions;
  readonly #observer: LeaseObserver;

  /**
   * @param api Object operations.
   * @param options The Lease and this contender.
   * @param observer Shared observations (when several locks read the same Leases).
   */
  constructor(api: KubeApi, options: LeaseLockOptions, observer?: LeaseObserver) {
    this.#api = api;
    this.#options = options;
    this.#observer = observer ?? new LeaseObserver(options.now);
  }

  /** The Lease's name. */
  get name(): string {
    return this.#options.name;
  }

  /** The observations this lock judges expiry by. */
  get observer(): LeaseObserver {
    return this.#observer;
  }

  /**
   * Reads the Lease and records the observation.
   * @param signal Cancels the request.
   * @returns The Lease, or `undefined` when it does not exist.
   */
  async read(signal?: AbortSignal): Promise<Lease | undefined> {
    try {
      const lease = await this.#api.get<Lease>(LEASES, this.#options.name, {
        namespace: this.#options.namespace,
        signal,
      });
      this.#observer.observe(lease);
      return lease;
    } catch (error) {
      if (error instanceof ApiError && error.code === 404) {
        this.#observer.forget(this.#options.name);
        return undefined;
      }
      throw error;
    }
  }

  /**
   * One round of client-go's `tryAcquireOrRenew`: creates the Lease if missing; renews it if
   * held by us; takes it if free or expired; else reports its holder. Never waits.
   *
   * @param options `known`: use this freshly listed Lease instead of reading it; `signal`.
   * @returns `held` (with `transitioned` when it just changed hands to us), `taken` by another,
   *   or `conflict` when another contender wrote first (try again next round).
   * @throws {ApiError} on other API errors (e.g. 403 without RBAC for leases).
   */
  async tryAcquireOrRenew(
    options: { known?: Lease | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<LeaseAttempt> {
    const { identity, leaseDurationSeconds, name, namespace } = this.#options;
    const now = microTime(new Date());
    const current = options.known ?? await this.read(options.signal);
    if (options.known) this.#observer.observe(options.known);
    if (!current) {
      try {
        const lease = await this.#api.create<Lease>(LEASES, {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: {
            name,
            namespace,
            ...(this.#options.labels ? { labels: { ...this.#options.labels } } : {}),
            ...(this.#options.annotations ? { annotations: { ...this.#options.annotations } } : {}),
          },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: 0,
          },
        }, { namespace, signal: options.signal });
        this.#observer.observe(lease);
        return { state: "held", lease, transitioned: true };
      } catch (error) {
        if (error instanceof ApiError && error.code === 409) return { state: "conflict" };
        throw error;
      }
    }
    const spec = current.spec ?? {};
    const ours = spec.holderIdentity === identity;
    const holder = this.#observer.holder(name);
    if (!ours && holder) return { state: "taken", holder };
    return await this.#write(
      current,
      {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: ours ? spec.acquireTime ?? now : now,
        renewTime: now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (ours ? 0 : 1),
      },
      !ours,
      options.signal,
    );
  }

  /**
   * Gives the Lease up if we hold it (empty holder, as client-go's `ReleaseOnCancel`), so
   * another contender takes it at once instead of after expiry.
   * @param options `known`: the Lease as last read by us, to skip the read; `signal`.
   * @returns Whether it was ours and is released now.
   */
  async release(
    options: { known?: Lease | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<boolean> {
    const current = options.known ?? await this.read(options.signal);
    if (!current || current.spec?.holderIdentity !== this.#options.identity) return false;
    const now = microTime(new Date());
    const result = await this.#write(
      current,
      {
        ...current.spec,
        holderIdentity: "",
        renewTime: now,
        acquireTime: null,
      },
      false,
      options.signal,
    );
    return result.state === "held";
  }

  async #write(
    current: Lease,
    spec: LeaseSpec,
    transitioned: boolean,
    signal: AbortSignal | undefined,
  ): Promise<LeaseAttempt> {
    try {
      const lease = await this.#api.replace<Lease>(LEASES, this.#options.name, {
        ...current,
        spec,
      }, { namespace: this.#options.namespace, signal });
      this.#observer.observe(lease);
      return { state: "held", lease, transitioned };
    } catch (error) {
      if (error instanceof ApiError && (error.code === 409 || error.code === 404)) {
        return { state: "conflict" };
      }
      throw error;
    }
  }
}
