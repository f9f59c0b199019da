/**
 * Fails when a module imports from a higher layer than its own.
 *
 * Layers, lowest first (see docs/architecture.md): core/util, core/structs, core/settings,
 * core/client, core/actions, core/intents, core/engines, core/reactor, core/api, kits, then the
 * top (mod.ts, cli.ts) and testing/. A file may import its own layer or lower ones. Test files
 * (`*_test.ts`), their shared scaffolding (`_test_support.ts`) and `tests/`, `tools/`, `bench/`,
 * `examples/` are exempt.
 *
 * Usage: deno run -A tools/check_layers.ts
 * @module
 */

const LAYERS: ReadonlyArray<readonly [prefix: string, rank: number]> = [
  ["core/util/", 0],
  ["core/structs/", 1],
  ["core/settings/", 2],
  ["core/client/", 3],
  ["core/actions/", 4],
  ["core/intents/", 5],
  ["core/engines/", 6],
  ["core/reactor/", 7],
  ["core/api/", 8],
  ["kits/", 9],
  ["mod.ts", 10],
  ["cli.ts", 10],
  ["testing/", 11],
];

const root = new URL("..", import.meta.url).pathname;

function rankOf(rel: string): number | undefined {
  for (const [prefix, rank] of LAYERS) {
    if (rel === prefix || rel.startsWith(prefix)) return rank;
  }
  return undefined;
}

/** The kit a path belongs to: `kits/x.ts` and the files under `kits/x/` are one kit. */
function kitOf(rel: string): string | undefined {
  return rel.split("/")[1]?.replace(/\.ts$/, "");
}

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory && !entry.name.startsWith(".") && entry.name !== "node_modules") {
      yield* walk(path);
    } else if (entry.isFile && entry.name.endsWith(".ts")) {
      yield path;
    }
  }
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;
const problems: string[] = [];

for await (const path of walk(root.replace(/\/$/, ""))) {
  const rel = path.slice(root.length);
  if (/_test(_support)?\.ts$/.test(rel) || /^(tests|tools|bench|examples)\//.test(rel)) continue;
  const own = rankOf(rel);
  if (own === undefined) continue;
  const text = await Deno.readTextFile(path);
  for (const match of text.matchAll(IMPORT)) {
    const spec = match[1] ?? match[2];
    if (!spec || !spec.startsWith(".")) continue;
    const target = new URL(spec, `file://${path}`).pathname.slice(root.length);
    const theirs = rankOf(target);
    if (theirs === undefined) continue;
    if (theirs > own) problems.push(`${rel} imports ${target} from a higher layer`);
    if (own === 9 && theirs === 9 && kitOf(rel) !== kitOf(target)) {
      problems.push(`${rel} imports another kit (${target}); kits stay independent`);
    }
  }
}

if (problems.length) {
  console.error(problems.join("\n"));
  console.error(`Layer check failed: ${problems.length} upward import(s)`);
  Deno.exit(1);
}
console.log("Layer check passed");
