/**
 * `kopf init NAME`: a new operator project, ready to run and to test: `deno.json` with tasks, a
 * CRD (with a status subresource) and its generated types, typed handlers, a test on the
 * in-memory emulator, a Dockerfile that uses `kopf build`, and `deploy/` with the generated RBAC
 * and a Deployment. Its `deno task test` passes right after creation.
 *
 * The framework comes from JSR (`jsr:@kopf/ts`) by default; `--kopf PATH` points the project at
 * a local checkout instead (its `deno.json` imports are copied, so that its files resolve).
 * The files' texts are made in init_templates.ts; this module works out what goes into them.
 * @module
 */

import { dirname, isAbsolute, relative, resolve } from "node:path";
import { commandLine, type ToolingIo, UsageError } from "./_io.ts";
import { generateTypes } from "./types.ts";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "./runtime_flags.ts";
import {
  type BuildContext,
  crdOf,
  crdYaml,
  deploymentYaml,
  dockerfile,
  handlersTs,
  rbacYaml,
  readme,
  testTs,
} from "./init_templates.ts";

/** What a new project is made of. */
export interface InitOptions {
  /** The project's name: its directory, ServiceAccount, Deployment and image. */
  readonly name: string;
  /** The custom resource's API group. @default "example.com" */
  readonly group?: string | undefined;
  /** The custom resource's kind. @default "Widget" */
  readonly kind?: string | undefined;
  /**
   * A local checkout of the framework instead of JSR, as a path relative to the project's
   * directory (or absolute): the project's `deno.json` imports it by this path.
   */
  readonly kopf?: string | undefined;
  /** The framework's version, for the JSR import. */
  readonly version: string;
  /**
   * The project's directory: a relative `kopf` is resolved against it, and `deno.json` names
   * the checkout relative to it. @default the working directory
   */
  readonly directory?: string | undefined;
}

/** The Deno the framework pins (tools/deno.sh) and the project's Dockerfile builds with. */
export const PINNED_DENO_VERSION = "2.9.6";

const USAGE = `Usage: kopf init [OPTIONS] NAME

Create a new operator project in the directory NAME: deno.json with tasks (run, dev, test,
types, rbac, build), a CRD and its types, handlers, a test on the in-memory emulator, a
Dockerfile and deploy/ manifests. Then it prints the commands to run next (with the Deno on
this machine: \`deno\` on PATH, else the framework checkout's tools/deno.sh).

Options:
      --group GROUP         The custom resource's API group (default: example.com).
      --kind KIND           The custom resource's kind (default: Widget).
      --kopf PATH           Use a local checkout of the framework instead of jsr:@kopf/ts
                            (deno.json refers to it by a relative path).
  -h, --help                Show this help.
`;

/** The project's files, by path relative to its directory. */
export type ProjectFiles = Map<string, string>;

/**
 * The files of a new project. Nothing is written.
 *
 * @param options Name, resource, framework source.
 * @returns The files by relative path.
 * @throws {UsageError} for a name or kind Kubernetes would not accept.
 */
export async function projectFiles(options: InitOptions): Promise<ProjectFiles> {
  const { name, version } = options;
  if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) {
    throw new UsageError(
      `The project name '${name}' must be a DNS label (lower-case letters, digits, '-'): it ` +
        "names the ServiceAccount, the Deployment and the image",
    );
  }
  const group = options.group ?? "example.com";
  const kind = options.kind ?? "Widget";
  if (!/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    throw new UsageError(`The kind '${kind}' must be in PascalCase, e.g. Widget`);
  }
  const singular = kind.toLowerCase();
  const plural = singular.endsWith("s") ? `${singular}es` : `${singular}s`;
  const constant = kind + (kind.endsWith("s") ? "es" : "s");
  const crdPath = `crds/${plural}.yaml`;
  const crd = crdOf(group, kind, singular, plural);
  const files: ProjectFiles = new Map();

  const directory = resolve(options.directory ?? Deno.cwd());
  const checkout = options.kopf === undefined
    ? undefined
    : resolve(directory, options.kopf.replace(/\/+$/, "") || "/");
  // Relative to the project (as deno.json resolves it): moving both together keeps it working.
  const kopf = checkout === undefined ? undefined : importPath(directory, checkout);
  const imports: Record<string, string> = kopf
    ? {
      "@kopf/ts": `${kopf}/mod.ts`,
      "@kopf/ts/client": `${kopf}/client.ts`,
      "@kopf/ts/tuning": `${kopf}/tuning.ts`,
      "@kopf/ts/testing": `${kopf}/testing/mod.ts`,
      "@kopf/ts/emulator": `${kopf}/kits/emulator/mod.ts`,
      "@kopf/ts/cli": `${kopf}/cli.ts`,
      "@kopf/ts/hierarchies": `${kopf}/kits/hierarchies.ts`,
      "@kopf/ts/conditions": `${kopf}/kits/conditions.ts`,
      "@kopf/ts/builtins": `${kopf}/kits/builtins.ts`,
      "@kopf/ts/metrics": `${kopf}/core/engines/observability/metrics.ts`,
      ...await frameworkImports(checkout!),
    }
    : { "@kopf/ts": `jsr:@kopf/ts@^${version}` };
  const rbacArgs = [
    "handlers.ts",
    "--crd",
    crdPath,
    "-A",
    "--standalone",
    "--name",
    name,
    "--account-namespace",
    name,
    "-o",
    "deploy/rbac.yaml",
  ];
  files.set(
    "deno.json",
    JSON.stringify(
      {
        tasks: {
          run: `deno run -A ${RUNTIME_DENO_FLAGS.join(" ")} --v8-flags=${
            RUNTIME_V8_FLAGS.join(",")
          } kopf.ts run handlers.ts --all-namespaces --standalone --verbose`,
          dev: "deno check handlers.ts && " +
            "deno run -A kopf.ts run --embedded --standalone --all-namespaces handlers.ts --verbose",
          test: "deno test -A",
          types: `deno run -A kopf.ts generate types ${crdPath} -o types.ts`,
          rbac: `deno run -A kopf.ts generate rbac ${rbacArgs.join(" ")}`,
          build: "deno run -A kopf.ts build handlers.ts -o dist/operator",
          kopf: "deno run -A kopf.ts",
        },
        imports,
        compilerOptions: { strict: true },
        fmt: { lineWidth: 100 },
      },
      null,
      2,
    ) + "\n",
  );
  files.set(
    "kopf.ts",
    [
      "/** The `kopf` command of this project: `deno run -A kopf.ts run handlers.ts`, etc. */",
      'import { kopf } from "@kopf/ts/cli";',
      "",
      "Deno.exit(await kopf(Deno.args));",
      "",
    ].join("\n"),
  );
  files.set(crdPath, crdYaml(crd));
  files.set(
    "types.ts",
    await generateTypes([crd], {
      importFrom: "@kopf/ts",
      command: `kopf generate types ${crdPath} -o types.ts`,
      lineWidth: 100, // the project's fmt.lineWidth (deno.json above), as `deno task types` does
    }),
  );
  files.set("handlers.ts", handlersTs(kind, constant));
  files.set("handlers_test.ts", testTs(group, kind, constant, crdPath));
  files.set("deploy/rbac.yaml", rbacYaml(crd, group, singular, plural, name, rbacArgs));
  files.set("deploy/deployment.yaml", deploymentYaml(name));
  files.set(
    "Dockerfile",
    dockerfile(name, PINNED_DENO_VERSION, checkout ? buildContext(directory, checkout) : undefined),
  );
  files.set(".gitignore", "/dist/\n/.kopf/\n");
  files.set("README.md", readme(name, group, kind, plural, crdPath, kopf, PINNED_DENO_VERSION));
  return files;
}

/**
 * Runs `kopf init …`: writes a new project into a directory that does not exist yet.
 *
 * @param args The arguments after `init`.
 * @param io Output channels.
 * @param version The framework's version (for the JSR import).
 * @returns The exit code.
 * @throws {UsageError} for bad arguments or an existing directory.
 */
export async function initCommand(
  args: readonly string[],
  io: ToolingIo,
  version: string,
): Promise<number> {
  const parsed = commandLine(args, {
    name: "kopf init",
    usage: USAGE,
    options: { group: { type: "string" }, kind: { type: "string" }, kopf: { type: "string" } },
  }, io);
  if (!parsed) return 0;
  const o = parsed.values;
  const [path, ...extra] = parsed.positionals;
  if (!path || extra.length) throw new UsageError("Give one project name (see kopf init --help)");
  const name = path.replace(/\/+$/, "").split("/").pop()!;
  const kopf = o.kopf ? await Deno.realPath(o.kopf).catch(() => undefined) : undefined;
  if (o.kopf && !kopf) throw new UsageError(`No such directory: ${o.kopf}`);
  if (kopf && !(await exists(`${kopf}/mod.ts`))) {
    throw new UsageError(`${o.kopf} is not a checkout of the framework (it has no mod.ts)`);
  }
  if (await exists(path)) throw new UsageError(`${path} exists already; choose another name`);
  const directory = resolve(path);
  const files = await projectFiles({
    name,
    group: o.group,
    kind: o.kind,
    kopf,
    version,
    directory,
  });
  for (const [file, text] of files) {
    const target = `${path}/${file}`;
    await Deno.mkdir(target.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.writeTextFile(target, text);
  }
  await formatProject(path);
  io.print(`Created ${path}/ with ${[...files.keys()].join(", ")}.`);
  const deno = await denoCommand(directory, kopf);
  if (!kopf) {
    const problem = await jsrProblem(version);
    if (problem) {
      const own = ownCheckout();
      io.print(
        `note: the project imports jsr:@kopf/ts@^${version}, but ${problem}: its tasks cannot ` +
          `load the framework. Make it from a local checkout instead: rm -r ${path} && kopf init ` +
          `${path} --kopf ${own ?? "PATH/TO/kopf-ts"}${
            own ? "" : " (a clone of the framework's repository)"
          }.`,
      );
    }
  }
  io.print("Next:");
  io.print(`  cd ${path}`);
  io.print(`  ${deno} task test    # the handlers' test, on an in-memory Kubernetes API`);
  io.print(`  ${deno} task dev     # the operator on an in-memory Kubernetes API`);
  if (deno !== "deno") {
    io.print(`(No \`deno\` on PATH: ${deno} runs the pinned Deno ${PINNED_DENO_VERSION}.)`);
  }
  return 0;
}

/**
 * Formats the new project at its own settings (`deno fmt`), so that names of any length leave it
 * as `deno fmt --check` wants it; skipped when this process is not Deno (a compiled `kopf`).
 */
async function formatProject(path: string): Promise<void> {
  if (!/(^|\/)deno(\.exe)?$/.test(Deno.execPath())) return;
  await new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--quiet"],
    cwd: path,
    stdout: "null",
    stderr: "null",
  }).output().catch(() => undefined);
}

/**
 * How to run Deno in the new project, on this machine: `deno` when it is on PATH, else the
 * framework checkout's `tools/deno.sh` (which installs the pinned Deno), else this process's
 * own Deno by its path.
 */
async function denoCommand(directory: string, checkout: string | undefined): Promise<string> {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && (await Deno.stat(`${dir}/deno`).catch(() => undefined))?.isFile) return "deno";
  }
  for (const root of [checkout, ownCheckout()]) {
    if (root && (await exists(`${root}/tools/deno.sh`))) {
      const script = `${root}/tools/deno.sh`;
      // Relative, as printed after `cd`; absolute when the two share no directory but the root.
      const near = relative(directory, script);
      const top = (path: string) => path.split("/")[1];
      return top(directory) === top(script) ? near : script;
    }
  }
  return /(^|\/)deno(\.exe)?$/.test(Deno.execPath()) ? Deno.execPath() : "deno";
}

/** The framework checkout this command runs from, when it runs from files (not JSR, a binary). */
function ownCheckout(): string | undefined {
  const url = new URL("../../../", import.meta.url);
  return url.protocol === "file:" ? url.pathname.replace(/\/$/, "") : undefined;
}

/**
 * Why JSR cannot give the project the framework, or `undefined` when it can: asks JSR for the
 * package's versions (a few seconds at most). `KOPF_TS_JSR_URL` replaces `https://jsr.io`.
 */
async function jsrProblem(version: string): Promise<string | undefined> {
  const registry = Deno.env.get("KOPF_TS_JSR_URL") ?? "https://jsr.io";
  try {
    const response = await fetch(`${registry}/@kopf/ts/meta.json`, {
      signal: AbortSignal.timeout(3000),
    });
    const text = await response.text();
    if (!response.ok) return `${registry} answers ${response.status} for @kopf/ts`;
    const major = version.split(".")[0];
    const versions = Object.keys((JSON.parse(text) as { versions?: object }).versions ?? {});
    return versions.some((v) => v.split(".")[0] === major)
      ? undefined
      : `${registry} has no version ^${version} of @kopf/ts`;
  } catch (error) {
    return `${registry} does not answer (${
      error instanceof Error ? error.message.split("\n")[0] : error
    })`;
  }
}

/** A path as deno.json's imports take it: relative to the project, with `./` or `../`. */
function importPath(directory: string, target: string): string {
  const path = relative(directory, target);
  if (!path) return ".";
  return path.startsWith("..") || isAbsolute(path) ? path : `./${path}`;
}

function buildContext(directory: string, checkout: string): BuildContext | undefined {
  let common = directory;
  while (relative(common, checkout).startsWith("..")) common = dirname(common);
  // A checkout inside the project is in the project's own context.
  if (common === directory) return undefined;
  return {
    context: relative(directory, common),
    project: relative(common, directory),
    checkout: relative(common, checkout),
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** The bare-specifier imports of the framework's own deno.json (its files use them). */
async function frameworkImports(kopf: string): Promise<Record<string, string>> {
  try {
    const config = JSON.parse(await Deno.readTextFile(`${kopf}/deno.json`));
    return { ...(config.imports ?? {}) };
  } catch (error) {
    throw new UsageError(
      `Cannot read ${kopf}/deno.json: ${error instanceof Error ? error.message : error}`,
    );
  }
}
