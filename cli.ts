#!/usr/bin/env -S deno run -A
/**
 * The `kopf` command (`tools/kopf` runs it: `kopf run handlers.ts`), or the binary made by
 * `deno task compile`. Handler files are loaded by dynamic import. `--embedded` serves an
 * in-memory Kubernetes API (the emulator kit) so that no cluster is needed.
 * @module
 */

import { main } from "./core/cli/main.ts";
import { KubeClient } from "./core/client/client.ts";
import { loadKubeconfig } from "./core/client/config.ts";
import { getDefaultRegistry } from "./core/intents/registries.ts";
import { describeSelector, resolveSelector } from "./core/intents/selectors.ts";
import { suggestResource } from "./core/reactor/streams/resolving.ts";

/** Kopf's peering CRDs, shipped with the framework: `--embedded` always applies them. */
const PEERING_CRDS = new URL("crds/peering.yaml", import.meta.url);
const PEERING_PLURALS = new Set(["kopfpeerings", "clusterkopfpeerings"]);

/** The CRD files of the project in the working directory: `crds/*.yaml|yml|json`, sorted. */
async function projectCrds(): Promise<string[]> {
  const files: string[] = [];
  try {
    for await (const entry of Deno.readDir("crds")) {
      if (entry.isFile && /\.(ya?ml|json)$/.test(entry.name)) files.push(`crds/${entry.name}`);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return files.sort();
}

async function embedded(extra: readonly string[], write: (line: string) => void) {
  // Loaded only when asked for: the emulator and its TLS stack cost every other run start-up
  // time and memory. (A literal specifier, so `deno compile` still bundles it.)
  const { Emulator } = await import("./kits/emulator/mod.ts");
  const own = await projectCrds();
  const emulator = await Emulator.start();
  try {
    // A compiled binary may not carry the framework's files: then there is no peering CRD.
    const peering = await Deno.readTextFile(PEERING_CRDS).catch(() => "");
    if (peering) await emulator.applyYaml(peering);
    const peeringPath = await Deno.realPath(PEERING_CRDS).catch(() => "");
    const plurals: string[] = [];
    for (const file of [...own, ...extra]) {
      if (peeringPath && (await Deno.realPath(file).catch(() => "")) === peeringPath) continue;
      const what = extra.includes(file) ? `--crd ${file}` : file;
      const text = await Deno.readTextFile(file).catch((error) => {
        throw new Error(`Cannot read ${what}: ${error.message}`);
      });
      const applied = await emulator.applyYaml(text).catch((error) => {
        throw new Error(`Cannot apply ${what}: ${error instanceof Error ? error.message : error}`);
      });
      const crds = applied.filter((o) => o.kind === "CustomResourceDefinition");
      const names = crds.map((crd) => String(crd.metadata?.name));
      write(`Applied ${file}${names.length ? `: ${names.join(", ")}` : ""}.`);
      for (const crd of crds) {
        const plural = (crd.spec as { names?: { plural?: string } } | undefined)?.names?.plural;
        if (plural && !PEERING_PLURALS.has(plural)) plurals.push(plural);
      }
    }
    if (!own.length && !extra.length) {
      write("No CRDs applied: there is no crds/ directory here, and no --crd FILE was given.");
    }
    write(
      `Embedded Kubernetes API at ${emulator.server} (in memory; gone when the operator stops).`,
    );
    write(`In another terminal:  export KUBECONFIG=${emulator.kubeconfigPath}`);
    if (plurals.length) write(`                      kubectl get ${plurals.join(",")}`);
    await checkSelectors(emulator.kubeconfigPath, write);
  } catch (error) {
    await emulator.stop();
    throw error;
  }
  // The kubeconfig's directory is the emulator's own (kopf-emulator-*): removed with the token.
  const dir = emulator.kubeconfigPath.slice(0, emulator.kubeconfigPath.lastIndexOf("/"));
  const discard = () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch { /* already removed */ }
  };
  return { kubeconfig: emulator.kubeconfigPath, stop: () => emulator.stop(), discard };
}

/** Says which of the handlers' resources the embedded API does not serve, and what to do. */
async function checkSelectors(kubeconfig: string, write: (line: string) => void) {
  using client = new KubeClient(await loadKubeconfig({ paths: [kubeconfig] }));
  const resources = await client.discovery.resources();
  for (const selector of getDefaultRegistry().selectors()) {
    const { resources: found, ambiguous } = resolveSelector(selector, resources);
    if (found.length || ambiguous) continue;
    const meant = suggestResource(selector, resources);
    write(
      `The embedded API serves no resource for ${describeSelector(selector)}${
        meant ? ` (did you mean "${meant}"?)` : ""
      }: pass its CRD with --crd FILE, or put it in crds/.`,
    );
  }
}

/**
 * Runs the `kopf` command line with the given arguments, as `deno run -A cli.ts ARGS` does
 * (with `--embedded` available). For a project's own command file.
 *
 * @example A project's `kopf.ts`
 * ```ts ignore
 * import { kopf } from "@kopf/ts/cli";
 *
 * Deno.exit(await kopf(Deno.args));
 * ```
 *
 * @param args The command line, e.g. `["run", "handlers.ts", "-n", "default"]`.
 * @returns The exit code.
 */
export function kopf(args: readonly string[]): Promise<number> {
  return main(args, { embedded });
}

if (import.meta.main) Deno.exit(await kopf(Deno.args));
