/**
 * The scale-out options of `kopf run` (`--leader-elect`, `--shards`, …) and the
 * `kopf shards` status command. Kept apart from `cli.ts` so the main command line stays small.
 * @module
 */

import type { OperatorSettings } from "../settings/settings.ts";
import { checkShardCount, MAX_SHARDS } from "../structs/shards.ts";

/** Usage lines of the scale-out options of `kopf run`. */
export const SCALING_USAGE =
  `      --leader-elect        Active/standby: only the holder of a Lease handles (docs/scaling.md).
      --shards              Active/active: replicas split the objects by shard Leases.
      --shard-count K       Virtual shards (default 32; all replicas must agree).
      --shard-by KEY        uid (default) or namespace.
      --lease-name NAME     Lease name (leader) or name prefix (shards); default kopf-leader / kopf.
      --lease-namespace NS  Namespace of the Leases (default: the operator's namespace).
`;

/** The `parseArgs` specs of the scale-out options. */
export const SCALING_OPTIONS = {
  "leader-elect": { type: "boolean" },
  shards: { type: "boolean" },
  "shard-count": { type: "string" },
  "shard-by": { type: "string" },
  "lease-name": { type: "string" },
  "lease-namespace": { type: "string" },
} as const;

/** The parsed values of {@link SCALING_OPTIONS}. */
export interface ScalingValues {
  readonly "leader-elect"?: boolean | undefined;
  readonly shards?: boolean | undefined;
  readonly "shard-count"?: string | undefined;
  readonly "shard-by"?: string | undefined;
  readonly "lease-name"?: string | undefined;
  readonly "lease-namespace"?: string | undefined;
}

/**
 * Applies the scale-out options to the settings (before the startup handlers, which may still
 * change them).
 * @param values The parsed options.
 * @param settings The operator's settings.
 * @returns An error message for unusable options, else `undefined`.
 */
export function applyScalingOptions(
  values: ScalingValues,
  settings: OperatorSettings,
): string | undefined {
  if (values["leader-elect"] && values.shards) {
    return "--leader-elect and --shards are mutually exclusive: sharded replicas are all active";
  }
  const sharded = values.shards ?? false;
  if (!sharded && (values["shard-count"] !== undefined || values["shard-by"] !== undefined)) {
    return "--shard-count and --shard-by need --shards";
  }
  if (values["leader-elect"]) {
    settings.leadership.enabled = true;
    if (values["lease-name"]) settings.leadership.name = values["lease-name"];
    if (values["lease-namespace"]) settings.leadership.namespace = values["lease-namespace"];
  }
  if (sharded) {
    settings.sharding.enabled = true;
    if (values["shard-count"] !== undefined) {
      const count = Number(values["shard-count"]);
      try {
        checkShardCount(count);
      } catch {
        return `--shard-count must be an integer from 1 to ${MAX_SHARDS}, got '${
          values["shard-count"]
        }'`;
      }
      settings.sharding.shards = count;
    }
    const key = values["shard-by"];
    if (key !== undefined && key !== "uid" && key !== "namespace") {
      return `--shard-by must be uid or namespace, got '${key}'`;
    }
    if (key) settings.sharding.key = key;
    if (values["lease-name"]) settings.sharding.name = values["lease-name"];
    if (values["lease-namespace"]) settings.sharding.namespace = values["lease-namespace"];
  }
  if (!values["leader-elect"] && !sharded) {
    if (values["lease-name"] || values["lease-namespace"]) {
      return "--lease-name and --lease-namespace need --leader-elect or --shards";
    }
  }
  return undefined;
}
