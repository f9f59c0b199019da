/**
 * The stop order of one term of service, as named stop groups (`parts.ts` runs them).
 *
 * When the stop comes (the operator's stop, a lost Lease, a failing part, or a start that failed
 * half-way), the webhook server, the workers, the Events poster and the shard coordinator hear
 * it at once and stop together; then the stop waits for them group by group:
 *
 * 1. `workers`: the orchestration of watch streams and the reconcile controllers finish their
 *    current cycles, for at most `settings.process.gracePeriod` seconds (then the stop goes on;
 *    their handlers were told);
 * 2. `reporting`: the Events poster posts what is queued;
 * 3. `intake`: the webhook server stops, and its managed webhook configurations are cleaned up;
 * 4. `coordination`: the shards' work stopped, their Leases are released;
 * 5. `caches`: told only now: the informer cache's watches end after their readers;
 * 6. `presence`: peering, waited for last. It hears the operator's stop (or a lost Lease) at
 *    once, as it always has, and removes its entries while the workers finish; after a start
 *    that failed half-way, it is told only now.
 * @module
 */

import type { OperatorSettings } from "../../settings/settings.ts";
import type { StopGroup } from "../../util/parts.ts";

/** The stop groups of a term's parts. */
export type TermGroup =
  | "workers"
  | "reporting"
  | "intake"
  | "coordination"
  | "caches"
  | "presence";

/**
 * The stop groups of one term, in their stop order.
 * @param settings The operator's settings (`process.gracePeriod`, read when the stop comes).
 * @returns The groups, first to stop first.
 */
export function termGroups(
  settings: OperatorSettings,
): readonly (StopGroup & { name: TermGroup })[] {
  return [
    { name: "workers", told: "at once", deadline: () => settings.process.gracePeriod * 1000 },
    { name: "reporting", told: "at once" },
    { name: "intake", told: "at once" },
    { name: "coordination", told: "at once" },
    { name: "caches", told: "in turn" },
    { name: "presence", told: "in turn" },
  ];
}
