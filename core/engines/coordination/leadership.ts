/**
 * Leader election (active/standby replicas) on one `coordination.k8s.io/v1` Lease, with
 * controller-runtime's semantics and defaults (lease 15 s, renew deadline 10 s, retry 2 s):
 *
 * - A standby tries to acquire the Lease every retry period; it watches and writes nothing else.
 * - The leader renews every retry period. If it cannot renew within the renew deadline, it has
 *   lost: {@link LeaderElector.lost} aborts at once, so all handling stops (handlers, daemons and
 *   timers get their stop signals) before a standby can take over (after the lease duration).
 * - On a graceful stop the leader releases the Lease (empty holder), so a standby takes over
 *   within one retry period instead of after expiry.
 *
 * Not here: what runs while leading (`reactor/lifetime/serving.ts`, the loop in `reactor/lifetime/coordinating.ts`), the Lease lock (`client/leases.ts`).
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import { type Lease, LeaseLock } from "../../client/leases.ts";
import { checkLeaseTimings, type LeadershipSettings } from "../../settings/scaling.ts";
import { sleep } from "../../util/backoff.ts";

/** The leader could not renew its Lease in time, or another replica holds it now. */
export class LeadershipLostError extends Error {
  /**
   * Creates the error.
   *
   * @param message Why, in one line.
   */
  constructor(message: string) {
    super(message);
    this.name = "LeadershipLostError";
  }
}

/** Where {@link replicaIdentity} reads from (the real process by default; tests pass their own). */
export interface IdentitySources {
  /** Reads an environment variable. @default Deno.env.get (undefined without --allow-env) */
  readonly env?: (name: string) => string | undefined;
  /** The host name. @default Deno.hostname() ("localhost" without --allow-sys) */
  readonly hostname?: () => string;
  /** The random suffix. @default 8 hex digits of a random UUID */
  readonly suffix?: () => string;
}

/**
 * A holder identity for a replica: `POD_NAME` (or `POD_ID`), else the host name, with a random
 * suffix so that a restarted process never mistakes its predecessor's claim for its own.
 * @param sources Where to read from instead of the process (for tests).
 * @returns E.g. `my-operator-7d9f-x2_3f9a1c2e`.
 */
export function replicaIdentity(sources: IdentitySources = {}): string {
  const env = sources.env ?? ((name: string) => {
    try {
      return Deno.env.get(name);
    } catch {
      return undefined;
    }
  });
  const hostname = sources.hostname ?? (() => {
    try {
      return Deno.hostname();
    } catch {
      return "localhost"; // no --allow-sys
    }
  });
  const suffix = sources.suffix ?? (() => crypto.randomUUID().slice(0, 8));
  const base = env("POD_NAME") || env("POD_ID") || hostname();
  return `${base}_${suffix()}`;
}

/**
 * The namespace of the scale-out Leases: the configured one, else the operator's own (the
 * connection's default namespace: the service account's in a pod, the kubeconfig context's
 * outside), else `default`.
 * @param configured `settings.leadership.namespace` or `settings.sharding.namespace`.
 * @param connectionNamespace The connection's default namespace, if any.
 * @returns The namespace to keep the Leases in.
 */
export function leaseNamespace(
  configured: string | null | undefined,
  connectionNamespace: string | undefined,
): string {
  return configured || connectionNamespace || "default";
}

/** What the elector needs. */
export interface LeadershipDeps {
  /** Object operations. */
  readonly api: KubeApi;
  /** The timings and the Lease's name. */
  readonly settings: LeadershipSettings;
  /** The Lease's namespace (resolved by the caller). */
  readonly namespace: string;
  /** This replica's identity. */
  readonly identity: string;
  /** Where to say what happens. */
  readonly logger: Logger;
}

/**
 * Competes for one Lease; see the module documentation for the guarantees.
 *
 * @example
 * ```ts ignore
 * const elector = new LeaderElector({ api, settings, namespace: "default", identity, logger });
 * if (await elector.acquire(signal)) {
 *   await work(AbortSignal.any([signal, elector.lost]));
 *   await elector.release();
 * }
 * ```
 */
export class LeaderElector {
  readonly #deps: LeadershipDeps;
  readonly #lock: LeaseLock;
  #lost = new AbortController();
  #renewing: Promise<void> | undefined;
  #stopRenewing = new AbortController();
  #last: Lease | undefined;

  /** @param deps Collaborators. @throws {RangeError} on impossible timings. */
  constructor(deps: LeadershipDeps) {
    checkLeaseTimings("leadership", deps.settings);
    this.#deps = deps;
    this.#lock = new LeaseLock(deps.api, {
      name: deps.settings.name,
      namespace: deps.namespace,
      identity: deps.identity,
      leaseDurationSeconds: Math.ceil(deps.settings.leaseDuration),
      labels: { "app.kubernetes.io/managed-by": "kopf" },
    });
  }

  /** Aborts (with a {@link LeadershipLostError}) when leadership is lost. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** This replica's identity. */
  get identity(): string {
    return this.#deps.identity;
  }

  /**
   * Waits until this replica holds the Lease, then keeps renewing it in the background.
   * @param signal Stops waiting.
   * @returns `true` when leading, `false` when the signal aborted first.
   */
  async acquire(signal: AbortSignal): Promise<boolean> {
    const { settings, logger, namespace, identity } = this.#deps;
    const where = `Lease ${namespace}/${settings.name}`;
    logger.info(`Waiting for leadership (${where}) as ${identity}.`);
    let reported: string | undefined;
    while (!signal.aborted) {
      try {
        const attempt = await this.#lock.tryAcquireOrRenew({
          signal: AbortSignal.any([signal, AbortSignal.timeout(settings.renewDeadline * 1000)]),
        });
        if (attempt.state === "held") {
          this.#last = attempt.lease;
          logger.info(`Leading: acquired ${where}.`);
          this.#lost = new AbortController();
          this.#stopRenewing = new AbortController();
          this.#renewing = this.#renew();
          return true;
        }
        if (attempt.state === "taken" && attempt.holder !== reported) {
          reported = attempt.holder;
          logger.info(`Standing by: ${where} is held by ${attempt.holder}.`);
        }
      } catch (error) {
        if (signal.aborted) break;
        logger.warning(`Cannot acquire ${where}: ${firstLine(error)}`);
      }
      await sleep(retryDelayMs(settings.retryPeriod), signal).catch(() => {});
    }
    return false;
  }

  async #renew(): Promise<void> {
    const { settings, logger, namespace } = this.#deps;
    const stop = this.#stopRenewing.signal;
    const where = `Lease ${namespace}/${settings.name}`;
    let renewedAt = performance.now();
    const lose = (why: string) => {
      const message = `Leadership lost: ${why}; stopping all handling now`;
      logger.error(message);
      this.#lost.abort(new LeadershipLostError(message));
    };
    while (!stop.aborted) {
      await sleep(settings.retryPeriod * 1000, stop).catch(() => {});
      if (stop.aborted) return;
      const left = settings.renewDeadline * 1000 - (performance.now() - renewedAt);
      let problem = "a conflicting write";
      try {
        const attempt = await this.#lock.tryAcquireOrRenew({
          signal: AbortSignal.any([stop, AbortSignal.timeout(Math.max(left, 1))]),
        });
        if (stop.aborted) return;
        if (attempt.state === "held") {
          this.#last = attempt.lease;
          renewedAt = performance.now();
          continue;
        }
        if (attempt.state === "taken") return lose(`${where} is held by ${attempt.holder} now`);
      } catch (error) {
        if (stop.aborted) return;
        problem = firstLine(error);
      }
      if (performance.now() - renewedAt >= settings.renewDeadline * 1000) {
        return lose(`could not renew ${where} within ${settings.renewDeadline}s (${problem})`);
      }
      logger.warning(`Cannot renew ${where} (retrying): ${problem}`);
    }
  }

  /**
   * Stops renewing and, if still leading, releases the Lease so a standby takes over at once.
   * @returns Resolves when released (errors are logged, not thrown).
   */
  async release(): Promise<void> {
    this.#stopRenewing.abort();
    await this.#renewing;
    this.#renewing = undefined;
    if (this.#lost.signal.aborted) return; // another replica may hold it by now: leave it alone
    try {
      const released = await this.#lock.release({ signal: AbortSignal.timeout(5_000) });
      if (released) {
        this.#deps.logger.info(
          `Released leadership (Lease ${this.#deps.namespace}/${this.#deps.settings.name}).`,
        );
      }
    } catch (error) {
      this.#deps.logger.warning(`Cannot release the leadership Lease: ${firstLine(error)}`);
    }
    this.#last = undefined;
  }

  /** The Lease as last written by this replica (for tests and status). */
  get lease(): Lease | undefined {
    return this.#last;
  }
}

/**
 * A standby's wait between attempts: the retry period shortened by up to 20% at random, so that
 * contenders do not move in step and a released Lease is taken within one retry period (jitter
 * on top, as in client-go, would stretch that to 1.2 periods).
 * @param seconds The retry period.
 * @param random A number in [0, 1).
 * @returns Milliseconds, in (0.8, 1] × the period.
 */
export function retryDelayMs(seconds: number, random: number = Math.random()): number {
  return seconds * 1000 * (1 - random * 0.2);
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}
