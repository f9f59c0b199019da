/**
 * `kopf freeze` and `kopf resume`: a peer with a high priority written into (or removed from)
 * the peering objects, so that running operators with a lower priority pause until it expires
 * or is removed (docs/peering.md).
 * @module
 */

import { parseArgs } from "node:util";
import { Logger } from "../actions/loggers.ts";
import { KubeClient } from "../client/client.ts";
import { detectIdentity, peeringTargets, touchPeering } from "../engines/coordination/peering.ts";
import { configureLogging } from "../api/logging.ts";
import { argsErrorMessage } from "./args.ts";
import {
  firstLine,
  fromEnvironment,
  LOGGING_OPTIONS,
  LOGGING_USAGE,
  loggingOf,
} from "./options.ts";

const PEERING_OPTIONS = {
  namespace: { type: "string", short: "n", multiple: true },
  "all-namespaces": { type: "boolean", short: "A" },
  peering: { type: "string", short: "P" },
  id: { type: "string", short: "i" },
  lifetime: { type: "string", short: "t" },
  priority: { type: "string", short: "p" },
  dev: { type: "boolean" },
  message: { type: "string", short: "m" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  ...LOGGING_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

const PEERING_USAGE = `Usage: kopf freeze [OPTIONS]
       kopf resume [OPTIONS]

freeze: write a peer with a high priority into the peering object, so that running operators with
a lower priority pause for --lifetime seconds (or until resumed). resume: remove that peer.

Options:
  -n, --namespace PATTERN   The KopfPeering objects in these namespaces; repeatable.
  -A, --all-namespaces      The ClusterKopfPeering object (the default without -n).
  -P, --peering NAME        The peering object's name (default: default).
  -i, --id ID               The peer's identity (default: user@host).
  -t, --lifetime SECONDS    freeze: how long the freeze lasts (required).
  -p, --priority N          freeze: the peer's priority (default 100).
      --dev                 freeze: priority 666.
  -m, --message TEXT        freeze: a note stored with the peer.
      --kubeconfig PATH     Kubeconfig file.
      --context NAME        Kubeconfig context.
${LOGGING_USAGE}  -h, --help                Show this help.
`;

/** Where `kopf freeze` / `kopf resume` write and what they are given besides their arguments. */
export interface PeeringCommandIo {
  /** Standard output (the usage). */
  readonly out: (line: string) => void;
  /** Standard error (results and errors). */
  readonly print: (line: string) => void;
  /** Where log lines go, if not logging's default. */
  readonly logs: { readonly write?: (line: string) => void };
  /** The kubeconfig file to use unless `--kubeconfig` is given. */
  readonly kubeconfig?: string | undefined;
}

/**
 * `kopf freeze` / `kopf resume`: one merge patch per peering object.
 * @param command Which of the two.
 * @param args The command's arguments.
 * @param io Where it writes, and the default kubeconfig.
 * @returns The exit code: 1 for an error or a peering object not found.
 */
export async function peeringCommand(
  command: "freeze" | "resume",
  args: readonly string[],
  io: PeeringCommandIo,
): Promise<number> {
  const { out, print } = io;
  const fail = (message: string): number => {
    print(`error: ${message}`);
    return 1;
  };
  let o;
  try {
    o = parseArgs({ args: [...args], options: PEERING_OPTIONS }).values;
  } catch (error) {
    return fail(`${argsErrorMessage(error)} (see kopf ${command} --help)`);
  }
  if (o.help) {
    out(PEERING_USAGE);
    return 0;
  }
  const invalid = fromEnvironment(command, o, PEERING_OPTIONS);
  if (invalid) return fail(invalid);
  const logging = loggingOf(o);
  if (typeof logging === "string") return fail(logging);
  await configureLogging({ ...logging, ...io.logs });
  const namespaces = o.namespace ?? [];
  if (o["all-namespaces"] && namespaces.length) {
    return fail("--namespace and --all-namespaces are mutually exclusive");
  }
  const priority = o.dev ? 666 : Number(o.priority ?? 100);
  const lifetime = command === "resume" ? 0 : Number(o.lifetime);
  if (command === "freeze") {
    if (o.lifetime === undefined) return fail("kopf freeze needs --lifetime SECONDS");
    if (!Number.isInteger(lifetime) || lifetime <= 0) {
      return fail(`--lifetime must be a positive integer, got '${o.lifetime}'`);
    }
    if (!Number.isInteger(priority)) {
      return fail(`--priority must be an integer, got '${o.priority}'`);
    }
  }
  const identity = o.id ?? detectIdentity({ manual: true });
  const kubeconfig = o.kubeconfig ?? io.kubeconfig;
  let client: KubeClient;
  try {
    const traffic = new Logger(["kopf", "client"]); // shown with --debug only
    client = await KubeClient.connect({
      ...(kubeconfig ? { kubeconfig } : {}),
      ...(o.context ? { context: o.context } : {}),
      onResponse: (r) =>
        traffic.debug(`${r.method} ${r.path} → ${r.code || "no answer"} in ${r.ms} ms`),
    });
  } catch (error) {
    return fail(firstLine(error));
  }
  try {
    const name = o.peering ?? "default";
    const clusterwide = !namespaces.length;
    const targets = await peeringTargets(client.api, { name, clusterwide }, namespaces);
    let missing = 0;
    for (const target of targets) {
      const where = target.namespace ? `in '${target.namespace}'` : "cluster-wide";
      const what = `${target.resource.kind} '${name}' ${where}`;
      const stored = await touchPeering(client.api, target, {
        identity,
        priority,
        lifetime,
        message: o.message,
      });
      if (!stored) {
        missing++;
        print(`error: Peering object ${what} is not found`);
      } else if (command === "freeze") {
        print(`Frozen ${what} as '${identity}' with priority ${priority} for ${lifetime}s.`);
      } else print(`Resumed ${what}: removed '${identity}'.`);
    }
    return missing ? 1 : 0;
  } catch (error) {
    return fail(firstLine(error));
  } finally {
    client[Symbol.dispose]();
  }
}
