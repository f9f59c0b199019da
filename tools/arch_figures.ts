/**
 * The architecture's figures, for a before → after comparison (issue 29): the `*Deps`-style
 * bags and their fields, the longest functions of the reactor, the names exported by `mod.ts`,
 * how many places build a handler context, and which test files need a control plane. Reads
 * the files of a checkout; runs nothing.
 *
 * Usage: deno run -A tools/arch_figures.ts [checkout directory, default: this repository]
 *
 * The function lengths come from brace matching over the source with strings, template
 * literals, regular expressions and comments blanked: close enough to rank functions, not a
 * parser. A test file "needs a control plane" when it reaches the real API server's helpers
 * (`testClient`, `kubeconfigPath`, `testNamespace`, `applyCrds`, `ControlPlane`,
 * `sharedControlPlane`, `createTestNamespace`, `KOPF_TS_TEST_KUBECONFIG`).
 * @module
 */

const root = (Deno.args[0] ?? new URL("..", import.meta.url).pathname).replace(/\/$/, "");

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory && !entry.name.startsWith(".")) yield* walk(path);
    else if (entry.isFile && entry.name.endsWith(".ts")) yield path;
  }
}

/** The source with the contents of comments and string-like literals replaced by spaces. */
export function blank(source: string): string {
  let out = "";
  let i = 0;
  const n = source.length;
  const keep = (c: string) => (c === "\n" ? "\n" : " ");
  while (i < n) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === "/" && next === "/") {
      while (i < n && source[i] !== "\n") out += keep(source[i++]!);
    } else if (c === "/" && next === "*") {
      out += "  ";
      i += 2;
      while (i < n && !(source[i] === "*" && source[i + 1] === "/")) out += keep(source[i++]!);
      out += "  ";
      i += 2;
    } else if (c === '"' || c === "'" || c === "`") {
      out += c;
      i++;
      while (i < n && source[i] !== c) {
        if (source[i] === "\\") out += keep(source[i++]!);
        if (i < n) out += keep(source[i++]!);
      }
      out += c;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Named functions and methods with their length in lines. */
export function functionLengths(source: string): { name: string; lines: number }[] {
  const text = blank(source);
  const found: { name: string; lines: number }[] = [];
  const head =
    /(?:^|\n)[ \t]*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?\s+(\w+)|(?:(?:private|public|protected|static|readonly|override)\s+)*(?:async\s+)?\*?\s*(#?\w+)\s*(?:<[^>\n]*>)?\s*\([^)]*\)\s*(?::[^{;\n]+)?\{|(?:const|let)\s+(\w+)\s*=\s*(?:async\s+)?(?:\([^)]*\)|\w+)\s*(?::[^=\n]+)?=>\s*\{)/g;
  for (const match of text.matchAll(head)) {
    const name = match[1] ?? match[2] ?? match[3];
    if (
      !name || ["if", "for", "while", "switch", "catch", "return", "constructor"].includes(name)
    ) {
      if (name !== "constructor") continue;
    }
    const open = text.indexOf("{", match.index! + match[0].indexOf(name!));
    if (open < 0) continue;
    let depth = 0;
    let end = open;
    for (; end < text.length; end++) {
      if (text[end] === "{") depth++;
      else if (text[end] === "}" && --depth === 0) break;
    }
    const lines = text.slice(match.index!, end).split("\n").length;
    found.push({ name: name!, lines });
  }
  return found;
}

interface Figures {
  depsBags: number;
  depsFields: number;
  bags: string[];
  longestReactor: string[];
  rootNames: number;
  contextBuilders: number;
  testFiles: number;
  planeTestFiles: number;
}

async function figures(): Promise<Figures> {
  const bags: string[] = [];
  let depsFields = 0;
  const lengths: { where: string; lines: number }[] = [];
  for await (const path of walk(`${root}/core`)) {
    if (path.endsWith("_test.ts") || path.endsWith("_test_support.ts")) continue;
    const source = await Deno.readTextFile(path);
    const rel = path.slice(root.length + 1);
    for (const match of source.matchAll(/export interface (\w+Deps)\b[^{]*\{/g)) {
      const start = match.index! + match[0].length;
      const text = blank(source.slice(start));
      let depth = 1;
      let end = 0;
      for (; end < text.length && depth > 0; end++) {
        if (text[end] === "{") depth++;
        else if (text[end] === "}") depth--;
      }
      const body = text.slice(0, end);
      // Fields at the interface's own level: `readonly x?:` / `x:` / `x(…):` at depth 0.
      let fields = 0;
      let level = 0;
      for (const line of body.split("\n")) {
        if (level === 0 && /^\s*(?:readonly\s+)?[#\w]+\??\s*[:(<]/.test(line)) fields++;
        for (const c of line) {
          if (c === "{" || c === "(") level++;
          else if (c === "}" || c === ")") level--;
        }
      }
      bags.push(`${match[1]} (${fields}, ${rel})`);
      depsFields += fields;
    }
    if (rel.startsWith("core/reactor/")) {
      for (const fn of functionLengths(source)) {
        lengths.push({ where: `${fn.name} (${rel})`, lines: fn.lines });
      }
    }
  }
  lengths.sort((a, b) => b.lines - a.lines);
  const mod = await Deno.readTextFile(`${root}/mod.ts`);
  const rootNames = new Set<string>();
  for (const match of blank(mod).matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) {
    const original = mod.slice(match.index!, match.index! + match[0].length);
    for (const part of original.replace(/^export\s+(?:type\s+)?\{|\}$/g, "").split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/).pop()?.trim();
      if (name && /^\w+$/.test(name)) rootNames.add(name);
    }
  }
  for (const match of mod.matchAll(/^export\s+(?:const|function|class|interface|type)\s+(\w+)/gm)) {
    rootNames.add(match[1]!);
  }
  let contextBuilders = 0;
  for await (const path of walk(`${root}/core/reactor`)) {
    if (path.endsWith("_test.ts")) continue;
    const source = await Deno.readTextFile(path);
    contextBuilders += [
      ...source.matchAll(
        /function (?:makeResourceContext|buildContext|reconcileContext|handlerContext|contextFor)\b/g,
      ),
    ].length;
    // The spawner's own closure that assembled a daemon's context.
    if (/function spawnerOf[\s\S]*?=>\s*\(\{\s*\.\.\.objectFields/.test(source)) contextBuilders++;
  }
  let testFiles = 0;
  let planeTestFiles = 0;
  const plane =
    /\b(?:testClient|kubeconfigPath|testNamespace|applyCrds|ControlPlane|sharedControlPlane|createTestNamespace)\s*\(|KOPF_TS_TEST_KUBECONFIG|ControlPlane\.start/;
  for await (const path of walk(`${root}/tests`)) {
    if (!path.endsWith("_test.ts")) continue;
    testFiles++;
    if (plane.test(await Deno.readTextFile(path))) planeTestFiles++;
  }
  return {
    depsBags: bags.length,
    depsFields,
    bags,
    longestReactor: lengths.slice(0, 8).map((l) => `${l.lines} ${l.where}`),
    rootNames: rootNames.size,
    contextBuilders,
    testFiles,
    planeTestFiles,
  };
}

if (import.meta.main) {
  const f = await figures();
  console.log(`checkout: ${root}`);
  console.log(`*Deps bags: ${f.depsBags} with ${f.depsFields} fields`);
  for (const bag of f.bags) console.log(`  ${bag}`);
  console.log(`longest reactor functions (lines):`);
  for (const line of f.longestReactor) console.log(`  ${line}`);
  console.log(`mod.ts root names: ${f.rootNames}`);
  console.log(`handler-context builders in the reactor: ${f.contextBuilders}`);
  console.log(`test files in tests/: ${f.testFiles}, needing a control plane: ${f.planeTestFiles}`);
}
