/**
 * The scale-out options of `kopf run` (`--leader-elect`, `--shards`, …) and the
 * `kopf shards` status command. Kept apart from `cli.ts` so the main command line stays small.
 * @module
 */

import { parseArgs } from "node:util";
import { KubeClient } from "../client/client.ts";
import { readShardStatus } from "../engines/coordination/sharding.ts";
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

const SHARDS_USAGE = `Usage: kopf shards [OPTIONS]

Print who holds which shards of a sharded operator (kopf run --shards): the live replicas and
each shard's hash range and holder, from the operator's Leases.

Options:
      --lease-name NAME     The Leases' name prefix (default: kopf).
      --lease-namespace NS  Their namespace (default: the kubeconfig context's, else default).
      --kubeconfig PATH     Kubeconfig file.
      --context NAME        Kubeconfig context.
  -h, --help                Show this help.
`;

/** How `kopf shards` prints and connects. */
export interface ShardsCommandOptions {
  /** Error lines. */
  readonly print: (line: string) => void;
  /** The report. */
  readonly output: (line: string) => void;
  /** Kubeconfig file to use unless `--kubeconfig` is given. */
  readonly kubeconfig?: string | undefined;
}

/**
 * `kopf shards`: prints the live replicas of a sharded operator and the holder of each shard.
 * @param args The arguments after `shards`.
 * @param options Output and connection defaults.
 * @returns The exit code: 0, or 1 with an `error:` line.
 */
export async function shardsCommand(
  args: readonly string[],
  options: ShardsCommandOptions,
): Promise<number> {
  const fail = (message: string) => {
    options.print(`error: ${message}`);
    return 1;
  };
  let values;
  try {
    values = parseArgs({
      args: [...args],
      options: {
        "lease-name": { type: "string" },
        "lease-namespace": { type: "string" },
        kubeconfig: { type: "string" },
        context: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    return fail(`${error instanceof Error ? error.message : error} (see kopf shards --help)`);
  }
  if (values.help) {
    options.output(SHARDS_USAGE);
    return 0;
  }
  const kubeconfig = values.kubeconfig ?? options.kubeconfig;
  let client: KubeClient;
  try {
    client = await KubeClient.connect({
      ...(kubeconfig ? { kubeconfig } : {}),
      ...(values.context ? { context: values.context } : {}),
    });
  } catch (error) {
    return fail(error instanceof Error ? error.message.split("\n")[0]! : String(error));
  }
  try {
    const name = values["lease-name"] ?? "kopf";
    const namespace = values["lease-namespace"] ?? client.http.connection.namespace ?? "default";
    const status = await readShardStatus(client.api, { name, namespace });
    if (!status.shards.length && !status.members.length) {
      return fail(
        `No shard Leases '${name}-*' in namespace ${namespace}: is kopf run --shards running there?`,
      );
    }
    options.output(
      `Sharded operator '${name}' in ${namespace}: ${status.count ?? "?"} shards, ` +
        `${status.members.length} live replicas`,
    );
    const width = Math.max(7, ...status.members.map((m) => m.identity.length));
    options.output(`${"replica".padEnd(width)}  shards`);
    for (const member of status.members) {
      options.output(`${member.identity.padEnd(width)}  ${member.shards.length}`);
    }
    options.output("");
    options.output(`${"shard".padEnd(5)}  ${"range".padEnd(39)}  holder`);
    for (const shard of status.shards) {
      options.output(
        `${String(shard.shard).padEnd(5)}  ${shard.range.padEnd(39)}  ${shard.holder ?? "(free)"}`,
      );
    }
    return 0;
  } catch (error) {
    return fail(error instanceof Error ? error.message.split("\n")[0]! : String(error));
  } finally {
    client[Symbol.dispose]();
  }
}
