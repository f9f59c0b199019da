/**
 * Fails when a module imports from a higher layer than its own, or when core/ modules import
 * each other in a circle at run time.
 *
 * Layers, lowest first (see docs/architecture.md): core/util, core/structs, core/settings,
 * core/client, core/actions, core/intents, core/engines, core/reactor, core/api, core/cli, kits,
 * then the top (the entry points mod.ts, client.ts, tuning.ts, cli.ts) and testing/. A file may import its own layer or lower ones.
 * core/api is what handler code calls; core/cli is the `kopf` command line, which nothing in
 * core/ or kits/ imports. Inside core/cli the order is its parts (args.ts, options.ts,
 * scaling.ts, loading.ts, peering_commands.ts), then the build-time generators (core/cli/generate/: init, generate types/rbac,
 * build, image), then the command itself (main.ts), which loads the generators lazily. Test
 * files (`*_test.ts`), their shared scaffolding (`_test_support.ts`) and `tests/`, `tools/`,
 * `bench/`, `examples/` are exempt.
 *
 * Cycles: `deno info --json` gives the module graph of every core/ module (not the tests), with
 * comments and strings already told apart from imports; an edge is any import that runs —
 * static, re-export or dynamic `import()` — and not one erased by TypeScript (`import type`,
 * `export type`, or braces that name only `type` members). Any circle among them fails.
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
  // The reactor in three parts over the streams they share: the cause pipeline and the
  // reconcile controller side by side (neither imports the other: SIBLINGS below), then the
  // operator's lifetime, which starts both.
  ["core/reactor/streams/", 7],
  ["core/reactor/causes/", 7.1],
  ["core/reactor/reconcile/", 7.1],
  ["core/reactor/lifetime/", 7.2],
  // The operator's scope (built once per term) and the one handler-context builder: read by
  // the streams, the cause pipeline, the reconcile controller and the lifetime alike.
  ["core/reactor/scope/", 7],
  ["core/reactor/", 7],
  ["core/api/", 8],
  // The command line, in three steps (listed before its folder: the first match counts).
  ["core/cli/generate/", 9.1],
  ["core/cli/main.ts", 9.2],
  ["core/cli/", 9],
  ["kits/", 10],
  ["mod.ts", 11],
  ["client.ts", 11],
  ["tuning.ts", 11],
  ["cli.ts", 11],
  ["testing/", 12],
];
const KITS = 10;
/** Parts of one layer that must not import each other (each stands on the layers below). */
const SIBLINGS: ReadonlyArray<readonly [string, string]> = [
  ["core/reactor/causes/", "core/reactor/reconcile/"],
];

/** The prefix of `rel` among the siblings, if any. */
function siblingOf(rel: string): string | undefined {
  return SIBLINGS.flat().find((prefix) => rel.startsWith(prefix));
}

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
const exempt = (rel: string) =>
  /_test(_support)?\.ts$/.test(rel) || /^(tests|tools|bench|examples)\//.test(rel);
/** The core/ modules whose import cycles are checked. */
const coreModules: string[] = [];

for await (const path of walk(root.replace(/\/$/, ""))) {
  const rel = path.slice(root.length);
  if (exempt(rel)) continue;
  if (rel.startsWith("core/")) coreModules.push(path);
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
    const [mine, other] = [siblingOf(rel), siblingOf(target)];
    if (mine && other && mine !== other) {
      problems.push(`${rel} imports ${target}: ${mine} and ${other} stay apart`);
    }
    if (own === KITS && theirs === KITS && kitOf(rel) !== kitOf(target)) {
      problems.push(`${rel} imports another kit (${target}); kits stay independent`);
    }
  }
}

/** One dependency of a module in `deno info --json`. */
interface InfoDependency {
  readonly specifier: string;
  readonly code?: {
    readonly specifier: string;
    readonly span: { readonly start: { readonly line: number; readonly character: number } };
  };
  readonly isDynamic?: boolean;
}

/** `import { type A, type B } from "…"` (or `export { type A }`): erased at run time. */
function namesOnlyTypes(source: string, line: number, character: number): boolean {
  const lines = source.split("\n");
  const before = lines.slice(0, line).join("\n") + "\n" + lines[line]!.slice(0, character);
  const braces = /(?:import|export)\s+\{([^}]*)\}\s*from\s*$/.exec(before);
  if (!braces) return false;
  const names = braces[1]!.split(",").map((name) => name.trim()).filter(Boolean);
  return names.length > 0 && names.every((name) => /^type\s/.test(name));
}

/** The run-time import edges among the given core/ modules (paths relative to the root). */
async function runtimeImports(paths: readonly string[]): Promise<Map<string, Set<string>>> {
  const entry = await Deno.makeTempFile({ prefix: "kopf-layers-", suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      entry,
      paths.map((path) => `import ${JSON.stringify(`file://${path}`)};\n`).join(""),
    );
    const info = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", `${root}deno.json`, entry],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!info.success) throw new Error(new TextDecoder().decode(info.stderr));
    const graph = JSON.parse(new TextDecoder().decode(info.stdout)) as {
      modules: { specifier: string; dependencies?: InfoDependency[] }[];
    };
    const wanted = new Set(paths.map((path) => path.slice(root.length)));
    const edges = new Map<string, Set<string>>();
    for (const module of graph.modules) {
      if (!module.specifier.startsWith("file://")) continue;
      const from = new URL(module.specifier).pathname.slice(root.length);
      if (!wanted.has(from)) continue;
      const source = await Deno.readTextFile(`${root}${from}`);
      const targets = new Set<string>();
      for (const dependency of module.dependencies ?? []) {
        const code = dependency.code;
        if (!code?.specifier.startsWith("file://")) continue; // type-only, npm:, node:, json…
        const to = new URL(code.specifier).pathname.slice(root.length);
        if (!wanted.has(to)) continue;
        const { line, character } = code.span.start;
        if (!dependency.isDynamic && namesOnlyTypes(source, line, character)) continue;
        targets.add(to);
      }
      edges.set(from, targets);
    }
    return edges;
  } finally {
    await Deno.remove(entry);
  }
}

/**
 * One circle per strongly connected component of the graph, as a path, with the number of
 * modules that the component holds.
 */
function cycles(
  edges: ReadonlyMap<string, ReadonlySet<string>>,
): { path: string[]; modules: number }[] {
  // Tarjan's strongly connected components.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || edges.get(node)?.has(node)) components.push(component);
    }
  };
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) visit(node);
  // A shortest circle through the component's first module (breadth first), for the message.
  return components.map((component) => {
    const members = new Set(component);
    const start = [...component].sort()[0]!;
    const previous = new Map<string, string>();
    const queue = [start];
    while (queue.length) {
      const node = queue.shift()!;
      for (const next of [...(edges.get(node) ?? [])].sort()) {
        if (!members.has(next)) continue;
        if (next === start) {
          const path = [node];
          while (path[0] !== start) path.unshift(previous.get(path[0]!)!);
          return { path: [...path, start], modules: component.length };
        }
        if (!previous.has(next)) {
          previous.set(next, node);
          queue.push(next);
        }
      }
    }
    return { path: [start, start], modules: 1 };
  });
}

for (const { path, modules } of cycles(await runtimeImports(coreModules))) {
  const among = modules > path.length - 1 ? ` (one of the circles among ${modules} modules)` : "";
  problems.push(`run-time import cycle: ${path.join(" → ")}${among}`);
}

if (problems.length) {
  console.error(problems.join("\n"));
  console.error(`Layer check failed: ${problems.length} problem(s)`);
  Deno.exit(1);
}
console.log("Layer check passed");
