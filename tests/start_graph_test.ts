/**
 * What an operator loads at start (docs/performance.md, round 8, issue 31 item 2): the modules
 * that `kopf run` (cli.ts) and `mod.ts` import statically, followed through static imports only —
 * what is loaded before the first handler file. Subsystems that most operators never use stay
 * behind dynamic imports: metrics (prom-client, ~15 MiB of RSS when loaded: it starts Deno's
 * Node.js compatibility for CommonJS), tracing (OpenTelemetry), webhook certificates
 * (@peculiar/x509 and its ASN.1 packages, imported by kits/certificates.ts when a certificate is
 * made), kubeconfig YAML (js-yaml), the generators'
 * dependencies. No cluster; `deno info --json` gives the graph.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

interface Dependency {
  readonly isDynamic?: boolean;
  readonly code?: { readonly specifier?: string };
  readonly type?: { readonly specifier?: string };
}
interface InfoModule {
  readonly specifier: string;
  readonly dependencies?: readonly Dependency[];
}

/** The specifiers reachable from `entry` through static, non-type-only imports. */
async function staticClosure(entry: string): Promise<Set<string>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: InfoModule[];
  };
  const modules = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const stack = [...info.roots];
  while (stack.length) {
    const specifier = stack.pop()!;
    if (seen.has(specifier)) continue;
    seen.add(specifier);
    for (const dependency of modules.get(specifier)?.dependencies ?? []) {
      if (dependency.isDynamic) continue;
      if (dependency.code?.specifier) stack.push(dependency.code.specifier);
    }
  }
  return seen;
}

/** Loaded only when used: the packages and the framework's modules that import them. */
const LAZY = [
  /^npm:.*prom-client/,
  /^npm:.*@opentelemetry/,
  /^npm:.*@peculiar/,
  /^npm:.*reflect-metadata/,
  /^npm:.*js-yaml/,
  /^npm:.*\byaml@/,
  /^npm:.*json-schema-to-typescript/,
  /\/core\/engines\/observability\/metrics\.ts$/,
  /\/core\/engines\/observability\/tracing\.ts$/,
];

for (const entry of ["cli.ts", "mod.ts"]) {
  Deno.test(`${entry}: rarely used subsystems are not loaded at start`, async () => {
    const closure = await staticClosure(entry);
    assert.ok(closure.size > 20, `the graph of ${entry} was read (${closure.size} modules)`);
    const loaded = [...closure].filter((s) => LAZY.some((re) => re.test(s)));
    assert.deepEqual(loaded, [], `statically imported from ${entry}: ${loaded.join(", ")}`);
  });
}
