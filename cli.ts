#!/usr/bin/env -S deno run -A
/**
 * The `kopf` command: `deno run -A cli.ts run handlers.ts`, or the binary made by
 * `deno task compile`. Handler files are loaded by dynamic import. `--embedded` serves an
 * in-memory Kubernetes API (the emulator kit) so that no cluster is needed.
 * @module
 */

import { main } from "./core/api/cli.ts";

/** The CRDs shipped with the project, applied by `--embedded`. */
const CRDS = ["crds/example.yaml", "crds/peering.yaml"].map((path) =>
  new URL(path, import.meta.url)
);

async function embedded(extra: readonly string[], write: (line: string) => void) {
  // Loaded only when asked for: the emulator and its TLS stack cost every other run start-up
  // time and memory. (A literal specifier, so `deno compile` still bundles it.)
  const { Emulator } = await import("./kits/emulator/mod.ts");
  const emulator = await Emulator.start();
  for (const file of [...CRDS, ...extra]) {
    const text = await Deno.readTextFile(file).catch((error) => {
      if (extra.includes(String(file))) {
        throw new Error(`Cannot read --crd ${file}: ${error.message}`);
      }
      return ""; // a compiled binary may not carry the bundled CRDs
    });
    if (text) await emulator.applyYaml(text);
  }
  write(`Embedded Kubernetes API at ${emulator.server} (in memory; gone when the operator stops).`);
  write(`In another terminal:  export KUBECONFIG=${emulator.kubeconfigPath}`);
  write(`                      kubectl apply -f examples/obj.yaml && kubectl get kopfexamples`);
  return { kubeconfig: emulator.kubeconfigPath, stop: () => emulator.stop() };
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
