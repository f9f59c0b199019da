/**
 * `kopf build --image`: an OCI image of the operator, written without a container engine (as
 * `ko` does for Go). Three layers, each reproducible:
 *
 * 1. a distroless-like base from Debian's packages (`./_image_base.ts`): C library, CA
 *    certificates, time zones, the `nonroot` user 65532, no shell;
 * 2. the Deno executable at `/usr/local/bin/deno` (the running one, or `--deno`);
 * 3. the operator: its local modules (the handler files and everything they and the framework
 *    import, as `deno info` lists them) under `/app`, with `deno.json` and a lock file pruned to
 *    the packages used, and the dependency cache (`DENO_DIR` filled by `deno cache`) at
 *    `/deno-dir`.
 *
 * The image runs `deno run --cached-only --frozen` as user 65532: nothing is fetched at run
 * time, and nothing is written (a read-only root file system works). Same input, same digest:
 * every file has mtime 0 and owner 0, entries are sorted, the config has no timestamps.
 * @module
 */

import { dirname, relative, resolve } from "node:path";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "./runtime_flags.ts";
import { baseDebs, baseLayer, NONROOT } from "./_image_base.ts";
import type { TarEntry } from "./_tar.ts";
import { type ImageArchive, ociArchitecture, writeImageArchive } from "./oci.ts";
import { UsageError } from "./_io.ts";

/** Options of {@link buildImage}. */
export interface ImageOptions {
  /** The handler files, relative to `cwd` or absolute. */
  readonly handlers: readonly string[];
  /** The archive's path. @default `dist/` + the first handler file's name + `.oci.tar` */
  readonly output?: string | undefined;
  /** The image's name and tag. @default the first handler file's name + `:latest` */
  readonly name?: string | undefined;
  /** The `deno` executable to run (and put into the image). @default `$DENO`, else this one */
  readonly deno?: string | undefined;
  /** The working directory. @default `Deno.cwd()` */
  readonly cwd?: string | undefined;
  /** Where the base's `.deb` files are (downloaded there with `apt-get download` if missing). */
  readonly baseDebs?: string | undefined;
  /** Where `kopf run`'s `main` comes from. @default this framework's `core/cli/main.ts` */
  readonly cliModule?: string | undefined;
}

/** What {@link buildImage} made. */
export interface ImageResult extends ImageArchive {
  /** Where the archive was written. */
  readonly output: string;
  /** The base's packages, `name=version`. */
  readonly packages: readonly string[];
}

/** Where the operator's files, the dependency cache and Deno go inside the image. */
export const IMAGE_PATHS = Object.freeze({
  app: "/app",
  denoDir: "/deno-dir",
  deno: "/usr/local/bin/deno",
});

interface InfoModule {
  readonly specifier: string;
  readonly kind?: string;
  readonly local?: string;
  readonly npmPackage?: string;
}

interface Info {
  readonly modules: readonly InfoModule[];
  readonly redirects: Readonly<Record<string, string>>;
  readonly npmPackages: Readonly<
    Record<string, { readonly dependencies?: readonly string[]; readonly localPath?: string }>
  >;
}

async function deno(
  executable: string,
  args: string[],
  env: Record<string, string>,
): Promise<string> {
  const output = await new Deno.Command(executable, {
    args,
    env: { ...env, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!output.success) {
    const error = new TextDecoder().decode(output.stderr).split("\n")
      .find((l) => l.startsWith("error:")) ?? new TextDecoder().decode(output.stderr).trim();
    throw new UsageError(`deno ${args[0]} failed: ${error.replace(/^error:\s*/, "")}`);
  }
  return new TextDecoder().decode(output.stdout);
}

async function findConfig(cwd: string): Promise<string> {
  for (let dir = cwd;; dir = dirname(dir)) {
    for (const name of ["deno.json", "deno.jsonc"]) {
      try {
        if ((await Deno.stat(`${dir}/${name}`)).isFile) return `${dir}/${name}`;
      } catch { /* not here */ }
    }
    if (dirname(dir) === dir) {
      throw new UsageError(
        `kopf build --image needs the project's deno.json (none in ${cwd} or above)`,
      );
    }
  }
}

async function walk(dir: string, into: string[]): Promise<void> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) await walk(path, into);
    else if (entry.isFile || entry.isSymlink) into.push(path);
  }
}

/**
 * The lock file for the image: the project's, with only the npm packages that the operator's
 * modules and the import map use (Deno installs every package a lock file names).
 */
function pruneLock(
  lock: Record<string, unknown>,
  config: Record<string, unknown>,
  info: Info,
): { lock: Record<string, unknown>; packages: Set<string> } {
  const wanted = new Set(Object.keys(info.redirects).filter((k) => k.startsWith("npm:")));
  for (const value of Object.values((config["imports"] ?? {}) as Record<string, string>)) {
    const match = /^npm:\/?(.+?@[^/]+)\/?$/.exec(value);
    if (match) wanted.add(`npm:${match[1]}`);
  }
  for (const m of info.modules) if (m.npmPackage) wanted.add(`npm:${m.npmPackage}`);
  const specifiers = Object.fromEntries(
    Object.entries((lock["specifiers"] ?? {}) as Record<string, string>)
      .filter(([key]) => wanted.has(key)),
  );
  const roots = Object.entries(specifiers).map(([key, version]) =>
    `${key.slice(4).replace(/@[^@]*$/, "")}@${version}`
  );
  for (const m of info.modules) if (m.npmPackage) roots.push(m.npmPackage);
  const packages = new Set<string>();
  const stack = [...roots];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (packages.has(id) || !info.npmPackages[id]) continue;
    packages.add(id);
    stack.push(...(info.npmPackages[id].dependencies ?? []));
  }
  const npm = Object.fromEntries(
    Object.entries((lock["npm"] ?? {}) as Record<string, unknown>)
      .filter(([id]) => packages.has(id)),
  );
  return { lock: { ...lock, specifiers, npm }, packages };
}

/**
 * Builds the image archive: caches the dependencies, collects the files, writes the layers.
 *
 * @param options The handler files, output, name, deno, base packages.
 * @returns The archive's digests, sizes and path.
 * @throws {UsageError} with one line for a missing deno.json, files outside the project, a
 *   failed `deno cache` or a base that cannot be made.
 */
export async function buildImage(options: ImageOptions): Promise<ImageResult> {
  if (!options.handlers.length) throw new UsageError("Give the handler files to build");
  const cwd = resolve(options.cwd ?? Deno.cwd());
  const configPath = await findConfig(cwd);
  const root = dirname(configPath);
  const handlers = options.handlers.map((h) => resolve(cwd, h));
  const outside = handlers.find((h) => relative(root, h).startsWith(".."));
  if (outside) throw new UsageError(`${outside} is outside the project at ${root}`);
  const first = handlers[0]!.split("/").pop()!.replace(/\.[^.]+$/, "");
  const output = resolve(cwd, options.output ?? `dist/${first}.oci.tar`);
  const executable = options.deno ?? Deno.env.get("DENO") ?? Deno.execPath();
  const buildDir = `${root}/.kopf/build`;
  const denoDir = `${buildDir}/deno-dir`;
  const env = { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: "1" };

  // The entry: `kopf run` with the handler files, all addressed relative to the entry.
  const cliModule = options.cliModule ?? new URL("../main.ts", import.meta.url).href;
  const cliRelative = cliModule.startsWith("file:")
    ? relative(buildDir, new URL(cliModule).pathname)
    : undefined;
  const cliSpecifier = cliRelative === undefined
    ? cliModule
    : cliRelative.startsWith(".")
    ? cliRelative
    : `./${cliRelative}`;
  const entryPath = `${buildDir}/image_main.ts`;
  const entry = [
    "// Generated by `kopf build --image`: the entry of the operator's image.",
    `import { main } from ${JSON.stringify(cliSpecifier)};`,
    "",
    "const HANDLERS = [",
    ...handlers.map((h) =>
      `  new URL(${JSON.stringify(relative(buildDir, h))}, import.meta.url).href,`
    ),
    "];",
    'Deno.exit(await main(["run", ...HANDLERS.flatMap((h) => ["-m", h]), ...Deno.args]));',
    "",
  ].join("\n");
  await Deno.mkdir(buildDir, { recursive: true });
  await Deno.writeTextFile(entryPath, entry);

  // The dependency cache, then the module graph of the entry and of each handler file (they are
  // imported dynamically, so the entry's graph does not reach them).
  const lockPath = `${root}/deno.lock`;
  const hadLock = await Deno.stat(lockPath).then(() => true, () => false);
  await deno(executable, [
    "cache",
    `--config=${configPath}`,
    ...(hadLock ? ["--frozen"] : []),
    entryPath,
    ...handlers,
  ], env);
  const info: Info = { modules: [], redirects: {}, npmPackages: {} };
  for (const module of [entryPath, ...handlers]) {
    const one = JSON.parse(
      await deno(executable, ["info", "--json", `--config=${configPath}`, module], env),
    ) as Info;
    (info.modules as InfoModule[]).push(...one.modules);
    Object.assign(info.redirects, one.redirects);
    Object.assign(info.npmPackages, one.npmPackages);
  }

  // The operator's layer: local modules, the config, the pruned lock, the cache.
  const app: TarEntry[] = [];
  const added = new Set<string>();
  const add = (path: string, data: Uint8Array, mode = 0o644) => {
    if (added.has(path)) return;
    added.add(path);
    app.push({ path, type: "file", mode, data });
  };
  const appDir = IMAGE_PATHS.app.slice(1);
  const cacheDir = IMAGE_PATHS.denoDir.slice(1);
  for (const module of info.modules) {
    if (module.specifier.startsWith("file:")) {
      const path = new URL(module.specifier).pathname;
      const rel = relative(root, path);
      if (rel.startsWith("..")) {
        throw new UsageError(
          `${path} (imported by the operator) is outside the project at ${root}`,
        );
      }
      add(`${appDir}/${rel}`, await Deno.readFile(path));
    } else if (module.local?.startsWith(`${denoDir}/`)) {
      add(`${cacheDir}/${relative(denoDir, module.local)}`, await Deno.readFile(module.local));
    }
  }
  const config = JSON.parse(await Deno.readTextFile(configPath)) as Record<string, unknown>;
  add(`${appDir}/${relative(root, configPath)}`, await Deno.readFile(configPath));
  if (await Deno.stat(lockPath).then(() => true, () => false)) {
    const lock = JSON.parse(await Deno.readTextFile(lockPath)) as Record<string, unknown>;
    const pruned = pruneLock(lock, config, info);
    add(
      `${appDir}/deno.lock`,
      new TextEncoder().encode(JSON.stringify(pruned.lock, null, 2) + "\n"),
    );
    for (const id of [...pruned.packages].sort()) {
      const local = info.npmPackages[id]?.localPath;
      if (!local) continue;
      const files: string[] = [];
      await walk(local, files);
      for (const file of files) {
        const stat = await Deno.lstat(file);
        if (!stat.isFile) continue;
        add(
          `${cacheDir}/${relative(denoDir, file)}`,
          await Deno.readFile(file),
          stat.mode !== null && stat.mode & 0o111 ? 0o755 : 0o644,
        );
      }
    }
  }
  const dirs = new Set<string>();
  for (const path of added) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  for (const dir of dirs) app.push({ path: dir, type: "dir", mode: 0o755 });

  // The base, Deno, and the image.
  const arch = ociArchitecture();
  const triplet = `${Deno.build.arch}-linux-gnu`;
  const debsDir = options.baseDebs ?? `${cacheHome()}/kopf/image-base/${arch}`;
  const base = await baseLayer(await baseDebs(debsDir, !options.baseDebs), triplet);
  const denoLayer: TarEntry[] = [
    { path: "usr", type: "dir", mode: 0o755 },
    { path: "usr/local", type: "dir", mode: 0o755 },
    { path: "usr/local/bin", type: "dir", mode: 0o755 },
    {
      path: IMAGE_PATHS.deno.slice(1),
      type: "file",
      mode: 0o755,
      data: await Deno.readFile(executable),
    },
  ];
  const archive = await writeImageArchive({
    name: options.name ?? `${first}:latest`,
    layers: [base.entries, denoLayer, app],
    architecture: arch,
    config: {
      user: `${NONROOT}:${NONROOT}`,
      env: [
        "PATH=/usr/local/bin:/usr/bin:/bin",
        `DENO_DIR=${IMAGE_PATHS.denoDir}`,
        "DENO_NO_UPDATE_CHECK=1",
        "DENO_NO_PROMPT=1",
        "HOME=/home/nonroot",
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
      ],
      entrypoint: [
        IMAGE_PATHS.deno,
        "run",
        "-A",
        "--cached-only",
        ...(added.has(`${appDir}/deno.lock`) ? ["--frozen"] : ["--no-lock"]),
        ...RUNTIME_DENO_FLAGS,
        `--v8-flags=${RUNTIME_V8_FLAGS.join(",")}`,
        `--config=${IMAGE_PATHS.app}/${relative(root, configPath)}`,
        `${IMAGE_PATHS.app}/${relative(root, entryPath)}`,
      ],
      cmd: ["--all-namespaces"],
      workingDir: IMAGE_PATHS.app,
      labels: { "dev.kopf.image.base-packages": base.packages.join(" ") },
    },
  });
  await Deno.mkdir(dirname(output), { recursive: true });
  await Deno.writeFile(`${output}.tmp`, archive.bytes);
  await Deno.rename(`${output}.tmp`, output);
  return { ...archive, output, packages: base.packages };
}

function cacheHome(): string {
  return Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME") ?? "/tmp"}/.cache`;
}
