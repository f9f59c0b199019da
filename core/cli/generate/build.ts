/**
 * `kopf build`: one binary holding the framework and the operator's handler files, made by
 * `deno compile`. The binary is `kopf run` with those files: `dist/operator -n my-ns`.
 *
 * A small entry module is written to `.kopf/build/main.ts` under the working directory; it
 * passes the handler files to `kopf run` as modules addressed relative to itself, so they are
 * found inside the binary, where `deno compile --include` puts them beside it (handler files
 * are loaded by dynamic import, which `deno compile` cannot follow on its own).
 * @module
 */

import { parseArgs } from "node:util";
import { argsErrorMessage } from "../args.ts";
import { type ToolingIo, UsageError } from "./commands.ts";

/**
 * The V8 flags an operator runs best with, baked into the binary by `kopf build` (and used by the
 * scaffold's tasks and the benchmark):
 * - `--max-semi-space-size=8`: young-generation semi-spaces of at most 8 MiB instead of V8's 16.
 *   During a burst V8 grows them to the maximum at once; capped at 4, a 2,000-object backlog
 *   peaked at 121 instead of 143 MiB for the same CPU (round 3); once a cycle allocated less
 *   (round 4), 8 cost ~11% less CPU than 4 for the same peak (docs/performance.md, round 5).
 * - `--maglev-as-top-tier`: V8's mid-tier compiler is the last one; TurboFan never runs. An
 *   operator's code is short handlers between network waits: the backlog took ~7% less CPU
 *   (less compiling), and the optimising compiler's machine code (~3 MiB of the executable) is
 *   never paged in, so it is not resident while the operator idles (round 7).
 *
 * V8 reads them only at start, so they cannot be set from inside; with `deno run`, pass
 * `--v8-flags=--max-semi-space-size=8,--maglev-as-top-tier` (or set `DENO_V8_FLAGS`).
 */
export const RUNTIME_V8_FLAGS: readonly string[] = Object.freeze([
  "--max-semi-space-size=8",
  "--maglev-as-top-tier",
]);

/**
 * The Deno flags an operator runs with (`deno run`, `deno compile`): `--no-code-cache`. V8's code
 * cache saves compiling at start (tens of milliseconds for the framework); a long-running
 * process does not need it, and the cache's database stays mapped and resident (2-3 MiB at idle,
 * round 7).
 */
export const RUNTIME_DENO_FLAGS: readonly string[] = Object.freeze(["--no-code-cache"]);

/** What `kopf build` runs: the entry module and the `deno compile` command line. */
export interface BuildPlan {
  /** Where the entry module goes. */
  readonly entryPath: string;
  /** The entry module's text. */
  readonly entry: string;
  /** The `deno` executable. */
  readonly deno: string;
  /** The arguments of `deno compile`. */
  readonly args: readonly string[];
  /** The binary to make. */
  readonly output: string;
}

/** Options of {@link planBuild}. */
export interface BuildOptions {
  /** The handler files, relative to `cwd` or absolute. */
  readonly handlers: readonly string[];
  /** The binary's path. @default `dist/` + the first handler file's name without extension */
  readonly output?: string | undefined;
  /** A `deno compile --target` (e.g. `aarch64-unknown-linux-gnu`). */
  readonly target?: string | undefined;
  /** The `deno` executable. @default `$DENO`, else this process's own executable */
  readonly deno?: string | undefined;
  /** The working directory. @default `Deno.cwd()` */
  readonly cwd?: string | undefined;
  /** Where the entry imports `main` from. @default this framework's `core/cli/main.ts` */
  readonly cliModule?: string | undefined;
}

const USAGE = `Usage: kopf build [OPTIONS] FILES...

Compile the operator made of the handler FILES into one binary with \`deno compile\`. The
binary runs \`kopf run\` with those files; give it kopf run's options: BINARY -n my-namespace.

Options:
  -o, --output PATH         The binary (default: dist/ + the first file's name).
      --target TRIPLE       Compile for another platform (deno compile --target).
      --deno PATH           The deno executable (default: $DENO, else the running one).
      --print               Write the entry module and print the deno compile command; do not
                            compile.
      --image               Instead of a binary, write an OCI image archive (no container
                            engine needed): a Debian-based distroless-like base, the deno
                            executable, the operator's files and their dependency cache; it runs
                            \`deno run --cached-only\` as user 65532. Default output:
                            dist/ + the first file's name + .oci.tar. Load it with
                            \`docker load -i\`, \`podman load -i\` or \`ctr images import\`.
      --tag NAME            The image's name and tag (with --image; default: FILE:latest).
      --base-debs DIR       The base's .deb files (libc6, libgcc-s1, ca-certificates, tzdata);
                            default: downloaded once with apt-get download into a cache.
  -h, --help                Show this help.
`;

const relative = (from: string, to: string): string => {
  const a = from.split("/").filter(Boolean);
  const b = to.split("/").filter(Boolean);
  let common = 0;
  while (common < a.length && common < b.length && a[common] === b[common]) common++;
  const up = a.slice(common).map(() => "..");
  const path = [...up, ...b.slice(common)].join("/");
  return path.startsWith(".") ? path : `./${path}`;
};

const absolute = (cwd: string, path: string): string =>
  (path.startsWith("/") ? path : `${cwd}/${path}`).replace(/\/\.\//g, "/");

/**
 * Plans a build: the entry module (its text and path) and the `deno compile` command line.
 * Nothing is written or run.
 *
 * @param options The handler files, the output, the target.
 * @returns The plan.
 * @throws {UsageError} without handler files.
 */
export function planBuild(options: BuildOptions): BuildPlan {
  if (!options.handlers.length) throw new UsageError("Give the handler files to build");
  const cwd = options.cwd ?? Deno.cwd();
  const files = options.handlers.map((h) => absolute(cwd, h));
  const buildDir = `${cwd}/.kopf/build`;
  const entryPath = `${buildDir}/main.ts`;
  const first = files[0]!.split("/").pop()!.replace(/\.[^.]+$/, "");
  const output = absolute(cwd, options.output ?? `dist/${first}`);
  const cliModule = options.cliModule ?? new URL("../main.ts", import.meta.url).href;
  const entry = [
    `// Generated by \`kopf build\`: the entry of the operator binary ${relative(cwd, output)}.`,
    "// The binary is `kopf run` with these handler files (carried in it by --include).",
    `import { main } from ${JSON.stringify(cliModule)};`,
    "",
    "const HANDLERS = [",
    ...files.map((f) =>
      `  new URL(${JSON.stringify(relative(buildDir, f))}, import.meta.url).href,`
    ),
    "];",
    'Deno.exit(await main(["run", ...HANDLERS.flatMap((h) => ["-m", h]), ...Deno.args]));',
    "",
  ].join("\n");
  const args = [
    "compile",
    "-A",
    ...RUNTIME_DENO_FLAGS,
    `--v8-flags=${RUNTIME_V8_FLAGS.join(",")}`,
    ...files.flatMap((f) => ["--include", f]),
    "--output",
    output,
    ...(options.target ? ["--target", options.target] : []),
    entryPath,
  ];
  const deno = options.deno ?? Deno.env.get("DENO") ?? Deno.execPath();
  return { entryPath, entry, deno, args, output };
}

/**
 * Turns `deno compile`'s failure output into one line: a runtime that could not be downloaded
 * says so and what to do; anything else gives its first error line.
 *
 * @param stderr What `deno compile` printed on standard error.
 * @returns The message.
 */
export function compileFailure(stderr: string): string {
  // deno colours its output unless NO_COLOR is set; strip the escapes.
  // deno-lint-ignore no-control-regex
  const text = stderr.replace(/\x1b\[[0-9;]*m/g, "");
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  const trace = lines.findIndex((l) => l.startsWith("Stack backtrace"));
  if (trace >= 0) lines.length = trace;
  const download = lines.find((l) => /denort|dl\.deno\.land/.test(l));
  if (download && /Setting up base binary|error sending request|dl\.deno\.land/.test(text)) {
    const cause = lines.filter((l) => /^\d+:/.test(l)).pop()?.replace(/^\d+:\s*/, "");
    return "deno compile could not download its runtime (denort) from dl.deno.land" +
      (cause ? ` (${cause})` : "") +
      ": build where it is reachable, or set DENORT_BIN to a denort binary of the same version";
  }
  const diagnostic = lines.findIndex((l) => /^TS\d+ \[ERROR\]/.test(l));
  if (diagnostic >= 0) {
    const at = lines.slice(diagnostic).find((l) => l.startsWith("at "));
    return `deno compile failed: ${lines[diagnostic]}${at ? ` ${at}` : ""}`;
  }
  const error = lines.find((l) => /^error:/.test(l))?.replace(/^error:\s*/, "");
  return `deno compile failed: ${error ?? lines[0] ?? "no output"}`;
}

/**
 * Runs `kopf build …`.
 *
 * @param args The arguments after `build`.
 * @param io Output channels.
 * @returns The exit code.
 * @throws {UsageError} for bad arguments and a failed compilation (one line).
 */
export async function buildCommand(args: readonly string[], io: ToolingIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        output: { type: "string", short: "o" },
        target: { type: "string" },
        deno: { type: "string" },
        print: { type: "boolean" },
        image: { type: "boolean" },
        tag: { type: "string" },
        "base-debs": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new UsageError(`${argsErrorMessage(error)} (see kopf build --help)`);
  }
  const o = parsed.values;
  if (o.help) {
    io.output(USAGE);
    return 0;
  }
  for (const file of parsed.positionals) {
    try {
      if (!Deno.statSync(file).isFile) throw new Error();
    } catch {
      throw new UsageError(`No such file: ${file}`);
    }
  }
  if (!o.deno && !Deno.env.get("DENO") && !/(^|\/)deno(\.exe)?$/.test(Deno.execPath())) {
    throw new UsageError(
      `kopf build runs deno ${
        o.image ? "cache" : "compile"
      }, and ${Deno.execPath()} is not deno: ` +
        "give the deno executable with --deno or $DENO",
    );
  }
  if (o.image) {
    const { buildImage } = await import("./image.ts");
    io.print(`Building an image of ${parsed.positionals.join(", ")}`);
    const image = await buildImage({
      handlers: parsed.positionals,
      output: o.output,
      name: o.tag,
      deno: o.deno,
      baseDebs: o["base-debs"],
    });
    const mib = (n: number) => (n / 1048576).toFixed(1);
    io.print(
      `Built ${image.output}: ${image.name} ${image.digest}, ${mib(image.bytes.length)} MiB ` +
        `(layers ${image.layerSizes.map(mib).join(" + ")} MiB compressed, ` +
        `${image.layerUncompressedSizes.map(mib).join(" + ")} MiB unpacked)`,
    );
    return 0;
  }
  if (o.tag || o["base-debs"]) throw new UsageError("--tag and --base-debs go with --image");
  const plan = planBuild({
    handlers: parsed.positionals,
    output: o.output,
    target: o.target,
    deno: o.deno,
  });
  await Deno.mkdir(plan.entryPath.replace(/\/[^/]+$/, ""), { recursive: true });
  await Deno.writeTextFile(plan.entryPath, plan.entry);
  const command = [plan.deno, ...plan.args].map((a) => /[\s"']/.test(a) ? JSON.stringify(a) : a);
  if (o.print) {
    io.output(command.join(" "));
    return 0;
  }
  io.print(`Compiling ${plan.output} (${command.join(" ")})`);
  let result: Deno.CommandOutput;
  try {
    result = await new Deno.Command(plan.deno, {
      args: [...plan.args],
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    throw new UsageError(
      `Cannot run ${plan.deno}: ${error instanceof Error ? error.message : error}` +
        " (give the deno executable with --deno or $DENO)",
    );
  }
  if (!result.success) {
    throw new UsageError(compileFailure(new TextDecoder().decode(result.stderr)));
  }
  io.print(`Built ${plan.output}: run it as ${plan.output} [kopf run options].`);
  return 0;
}
