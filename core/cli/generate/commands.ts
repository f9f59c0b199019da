/**
 * The developer-tooling commands: `kopf generate types|rbac`, `kopf init`, `kopf build`. Kept
 * apart from the operator's own command line (`main.ts` only dispatches here); each command's
 * work lives in its own module, loaded when the command runs.
 * @module
 */

import { dirname, resolve } from "node:path";
import { KubeClient } from "../../client/client.ts";
import { CRD_RESOURCE } from "../../client/discovery.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { commandLine, type ToolingIo, UsageError } from "./_io.ts";

const GENERATE_USAGE = `Usage: kopf generate types [OPTIONS] CRD_FILES...
       kopf generate types --from-cluster [OPTIONS] [CRD_NAMES...]
       kopf generate builtins [-o FILE] [--import SPECIFIER]
       kopf generate rbac [OPTIONS] [FILES]...

types: TypeScript types and typed resource constants for custom resources, from the CRDs'
  openAPIV3Schema (files, or the cluster's CRDs: all, or those named like kopfexamples.kopf.dev).
builtins: the types of Pod, Deployment, Service, ConfigMap, Secret, Job, Event, Lease and
  Namespace (and typed resource constants) from the cluster's OpenAPI v3 documents.
rbac: a ServiceAccount, roles and bindings for the operator made of the given handler files
  and modules (what it watches, patches, posts and peers), or --verify them in the cluster.

Options (types):
  -o, --output FILE         Write to FILE instead of standard output.
      --import SPECIFIER    Where the types import the framework from (default: @kopf/ts).
      --from-cluster        Read the CRDs from the cluster.
Options (rbac): see kopf generate rbac --help.
Common:
      --kubeconfig PATH     Kubeconfig file.
      --context NAME        Kubeconfig context.
  -h, --help                Show this help.
`;

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n").map((l) => l.trim()).find(Boolean) ?? "unknown error";
}

/**
 * Runs `kopf generate …`, `kopf init …` or `kopf build …`.
 *
 * @param command `generate`, `init` or `build`.
 * @param args The arguments after the command.
 * @param io Output channels and defaults.
 * @returns The exit code: 0 on success, 1 with one `error:` line otherwise.
 */
export async function tooling(
  command: "generate" | "init" | "build",
  args: readonly string[],
  io: ToolingIo,
): Promise<number> {
  try {
    if (command === "generate") {
      const [what, ...rest] = args;
      if (!what || what === "-h" || what === "--help") {
        io.output(GENERATE_USAGE);
        return what ? 0 : 1;
      }
      if (what === "types") return await generateTypesCommand(rest, io);
      if (what === "builtins") return await generateBuiltinsCommand(rest, io);
      if (what === "rbac") {
        const { rbacCommand } = await import("./rbac_command.ts");
        return await rbacCommand(rest, io);
      }
      throw new UsageError(`Unknown generator '${what}'; use types, builtins or rbac`);
    }
    if (command === "init") {
      const [{ initCommand }, { default: config }] = await Promise.all([
        import("./init.ts"),
        import("../../../deno.json", { with: { type: "json" } }),
      ]);
      return await initCommand(args, io, config.version);
    }
    if (command === "build") {
      const { buildCommand } = await import("./build.ts");
      return await buildCommand(args, io);
    }
    throw new UsageError(`kopf ${command} is not available yet`);
  } catch (error) {
    io.print(`error: ${firstLine(error)}`);
    return 1;
  }
}

async function generateTypesCommand(args: readonly string[], io: ToolingIo): Promise<number> {
  const parsed = commandLine(args, {
    name: "kopf generate",
    usage: GENERATE_USAGE,
    options: {
      output: { type: "string", short: "o" },
      import: { type: "string" },
      "from-cluster": { type: "boolean" },
      kubeconfig: { type: "string" },
      context: { type: "string" },
    },
  }, io);
  if (!parsed) return 0;
  const o = parsed.values;
  const { configuredLineWidth, generateTypes, readCrdFiles } = await import("./types.ts");
  let crds: KubeObject[];
  if (o["from-cluster"]) {
    crds = await clusterCrds(parsed.positionals, o.kubeconfig ?? io.kubeconfig, o.context);
  } else {
    if (!parsed.positionals.length) {
      throw new UsageError("Give CRD files, or --from-cluster (see kopf generate --help)");
    }
    crds = await readCrdFiles(parsed.positionals);
  }
  // Formatted as the project that gets the file formats it (its deno.json).
  const configDir = o.output ? dirname(resolve(o.output)) : Deno.cwd();
  const text = await generateTypes(crds, {
    importFrom: o.import ?? "@kopf/ts",
    command: ["kopf generate types", ...args].join(" "),
    lineWidth: await configuredLineWidth(configDir),
    configDir,
  });
  if (o.output) {
    await Deno.writeTextFile(o.output, text);
    io.print(`Wrote ${crds.length} CRD(s) as types to ${o.output}.`);
  } else io.output(text);
  return 0;
}

async function generateBuiltinsCommand(args: readonly string[], io: ToolingIo): Promise<number> {
  const parsed = commandLine(args, {
    name: "kopf generate",
    usage: GENERATE_USAGE,
    positionals: false,
    options: {
      output: { type: "string", short: "o" },
      import: { type: "string" },
      kubeconfig: { type: "string" },
      context: { type: "string" },
    },
  }, io);
  if (!parsed) return 0;
  const o = parsed.values;
  const kubeconfig = o.kubeconfig ?? io.kubeconfig;
  const { fetchSchemas, generateBuiltins } = await import("./builtins.ts");
  using client = await KubeClient.connect({
    ...(kubeconfig ? { kubeconfig } : {}),
    ...(o.context ? { context: o.context } : {}),
  });
  const { schemas, version } = await fetchSchemas(client);
  const text = await generateBuiltins(schemas, {
    importFrom: o.import ?? "@kopf/ts",
    kubernetes: version,
    command: [
      "kopf generate builtins",
      ...(o.output ? ["-o", o.output] : []),
      ...(o.import ? ["--import", o.import] : []),
    ].join(" "),
  });
  if (o.output) {
    await Deno.writeTextFile(o.output, text);
    io.print(`Wrote the built-in kinds' types of Kubernetes ${version} to ${o.output}.`);
  } else io.output(text);
  return 0;
}

/** The cluster's CRDs: all of them, or those whose name, plural or group is given. */
async function clusterCrds(
  names: readonly string[],
  kubeconfig: string | undefined,
  context: string | undefined,
): Promise<KubeObject[]> {
  using client = await KubeClient.connect({
    ...(kubeconfig ? { kubeconfig } : {}),
    ...(context ? { context } : {}),
  });
  const { items } = await client.api.list(CRD_RESOURCE);
  // Items of a list carry no kind of their own.
  const all = items.map((crd) => ({ ...crd, kind: "CustomResourceDefinition" }));
  const found = names.length ? all.filter((crd) => names.some((n) => matches(crd, n))) : all;
  const missing = names.filter((n) => !all.some((crd) => matches(crd, n)));
  if (missing.length) throw new UsageError(`No such CRD in the cluster: ${missing.join(", ")}`);
  if (!found.length) throw new UsageError("The cluster has no CRDs");
  return found.sort((a, b) => (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""));
}

function matches(crd: KubeObject, name: string): boolean {
  const spec = crd.spec as { group?: string; names?: { plural?: string } } | undefined;
  return name === crd.metadata?.name || name === spec?.names?.plural || name === spec?.group;
}
