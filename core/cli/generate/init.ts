/**
 * `kopf init NAME`: a new operator project, ready to run and to test: `deno.json` with tasks, a
 * CRD (with a status subresource) and its generated types, typed handlers, a test on the
 * in-memory emulator, a Dockerfile that uses `kopf build`, and `deploy/` with the generated RBAC
 * and a Deployment. Its `deno task test` passes right after creation.
 *
 * The framework comes from JSR (`jsr:@kopf/ts`) by default; `--kopf PATH` points the project at
 * a local checkout instead (its `deno.json` imports are copied, so that its files resolve).
 * @module
 */

import { dirname, isAbsolute, relative, resolve } from "node:path";
import { stringify } from "yaml";
import { typedResource } from "../../intents/typed_resources.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { on } from "../../api/on.ts";
import { commandLine, type ToolingIo, UsageError } from "./_io.ts";
import { rbacDocuments, renderYaml, requiredPermissions, resourcesOfCrds } from "./rbac.ts";
import { generateTypes } from "./types.ts";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "./runtime_flags.ts";

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
    dockerfile(name, checkout ? buildContext(directory, checkout) : undefined),
  );
  files.set(".gitignore", "/dist/\n/.kopf/\n");
  files.set("README.md", readme(name, group, kind, plural, crdPath, kopf));
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

/** Where a project that imports a local checkout is built from: their common directory. */
interface BuildContext {
  /** The context directory, relative to the project. */
  readonly context: string;
  /** The project's directory within the context. */
  readonly project: string;
  /** The checkout's directory within the context. */
  readonly checkout: string;
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

function crdOf(group: string, kind: string, singular: string, plural: string): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { kind, singular, plural, listKind: `${kind}List` },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: "Size", type: "string", jsonPath: ".spec.size" },
          { name: "Replicas", type: "integer", jsonPath: ".spec.replicas" },
          { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
        ],
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                description: `The desired state of the ${kind}.`,
                required: ["size"],
                properties: {
                  size: {
                    type: "string",
                    enum: ["small", "medium", "large"],
                    description: "How big it should be.",
                  },
                  replicas: {
                    type: "integer",
                    minimum: 1,
                    default: 1,
                    description: "How many there should be.",
                  },
                },
              },
              status: {
                type: "object",
                description: "Written by the operator.",
                "x-kubernetes-preserve-unknown-fields": true,
              },
            },
          },
        },
      }],
    },
  };
}

function crdYaml(crd: KubeObject): string {
  return `# The custom resource of this operator. After a change, run \`deno task types\` (types.ts)
# and \`deno task rbac\` (deploy/rbac.yaml).\n${stringify(crd)}`;
}

function handlersTs(kind: string, constant: string): string {
  return `/**
 * The operator's handlers. \`deno task dev\` runs them against an in-memory cluster,
 * \`deno task run\` against the current kubeconfig's cluster.
 */
import { on } from "@kopf/ts";
import { ${constant} } from "./types.ts";

on.create(${constant}, function create_${kind.toLowerCase()}({ spec, name, logger }) {
  logger.info(\`${kind} \${name} created: \${spec.size}, \${spec.replicas ?? 1} replica(s).\`);
  // Returned values are stored in the object's status under the handler's name.
  return { replicas: spec.replicas ?? 1 };
});

on.update(${constant}, function update_${kind.toLowerCase()}({ diff, spec, logger }) {
  logger.info(\`Changed: \${JSON.stringify(diff)}\`);
  return { replicas: spec.replicas ?? 1 };
});

on.delete(${constant}, function delete_${kind.toLowerCase()}({ name, logger }) {
  logger.info(\`${kind} \${name} deleted; cleaning up.\`);
});
`;
}

function testTs(group: string, kind: string, constant: string, crdPath: string): string {
  const handled = `create_${kind.toLowerCase()}`;
  return `/**
 * The operator tested without a cluster: the in-memory emulator serves the Kubernetes API,
 * \`KopfRunner\` runs the operator in this process. \`deno task test\`.
 */
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { KubeClient, loadKubeconfig } from "@kopf/ts";
import { Emulator } from "@kopf/ts/emulator";
import { KopfRunner } from "@kopf/ts/testing";
import { type ${kind}, ${constant} } from "./types.ts";

Deno.test({
  name: "the operator handles a ${kind}'s creation, change and deletion",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using emulator = await Emulator.start();
    await emulator.applyYaml(
      await Deno.readTextFile(new URL("./${crdPath}", import.meta.url)),
    );
    using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    const handlers = new URL("./handlers.ts", import.meta.url).pathname;
    await using runner = KopfRunner.start(["run", "-n", "default", "--standalone", handlers], {
      kubeconfig: emulator.kubeconfigPath,
    });
    await runner.ready;

    // The typed resource from types.ts types what the client writes and reads: no casts.
    const body: ${kind} = {
      apiVersion: "${group}/v1",
      kind: "${kind}",
      metadata: { name: "first" },
      spec: { size: "small", replicas: 2 },
    };
    await client.api.create(${constant}, body, { namespace: "default" });
    await runner.waitFor(/${kind} first created: small, 2 replica\\(s\\)\\./);
    await eventually(async () => {
      const live = await client.api.get(${constant}, "first", { namespace: "default" });
      return isDeepStrictEqual(live.status?.${handled}, { replicas: 2 });
    });

    const changed = await client.api.patch(${constant}, "first", { spec: { replicas: 3 } }, {
      namespace: "default",
    });
    assert.equal(changed.spec?.replicas, 3);
    await runner.waitFor(/Changed: .*replicas/);
    await client.api.delete(${constant}, "first", { namespace: "default" });
    await runner.waitFor(/${kind} first deleted; cleaning up\\./);
    await runner.stop();
    assert.equal(runner.exitCode, 0);
  },
});

async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("Timed out");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
`;
}

function rbacYaml(
  crd: KubeObject,
  group: string,
  singular: string,
  plural: string,
  name: string,
  args: readonly string[],
): string {
  // The registry of handlers.ts, built here the same way (the project's own modules import the
  // framework by a specifier this process cannot resolve); \`deno task rbac\` writes the same.
  const registry = new OperatorRegistry();
  const resource = typedResource(group, "v1", plural);
  on.create(resource, { registry, id: `create_${singular}` }, () => {});
  on.update(resource, { registry, id: `update_${singular}` }, () => {});
  on.delete(resource, { registry, id: `delete_${singular}` }, () => {});
  const options = {
    namespaces: [],
    clusterwide: true,
    name,
    accountNamespace: name,
    standalone: true,
    leases: undefined,
  };
  const permissions = requiredPermissions(registry, resourcesOfCrds([crd]), options);
  return renderYaml(rbacDocuments(permissions, options), [
    `Generated by \`kopf generate rbac ${args.join(" ")}\`.`,
    "Exactly what the operator uses; generate again when its handlers or options change.",
  ]);
}

function deploymentYaml(name: string): string {
  return `# The operator as a Deployment in the namespace ${name} (with deploy/rbac.yaml):
#   kubectl create namespace ${name}
#   kubectl apply -n ${name} -f crds/ -f deploy/
${
    stringify({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, labels: { "app.kubernetes.io/name": name } },
      spec: {
        replicas: 1,
        strategy: { type: "Recreate" },
        selector: { matchLabels: { "app.kubernetes.io/name": name } },
        template: {
          metadata: { labels: { "app.kubernetes.io/name": name } },
          spec: {
            serviceAccountName: name,
            containers: [{
              name: "operator",
              image: `${name}:latest`,
              args: ["--all-namespaces", "--standalone", "--liveness=http://0.0.0.0:8080/healthz"],
              livenessProbe: { httpGet: { path: "/healthz", port: 8080 } },
              resources: {
                requests: { cpu: "50m", memory: "64Mi" },
                limits: { memory: "256Mi" },
              },
            }],
          },
        },
      },
    })
  }`;
}

function dockerfile(name: string, local?: BuildContext): string {
  const build = local
    ? `# The framework comes from the checkout ${local.checkout} beside this project, so the image is
# built from their common directory, ${local.context} (only the two directories are sent):
#   docker build -f Dockerfile -t ${name}:latest ${local.context}
`
    : `#   docker build -t ${name}:latest .
`;
  const copy = local
    ? `WORKDIR /src/${local.project}
COPY ${local.checkout} /src/${local.checkout}
COPY ${local.project} /src/${local.project}`
    : `WORKDIR /src
COPY . .`;
  return `# One binary with the framework and the handlers (\`kopf build\`), in a distroless image.
${build}# Commit deno.lock (the first \`deno task test\` writes it): \`deno install --frozen\` below fails
# the build when the lock is missing an entry or differs, instead of resolving packages anew.
# The base images are pinned by tag; pin them by digest too once you have resolved the digests
# (\`docker buildx imagetools inspect IMAGE\`): --build-arg DENO_DIGEST=@sha256:… and
# --build-arg RUNTIME_DIGEST=@sha256:… (empty: the tag only, which its owner can move).
ARG DENO_VERSION=${PINNED_DENO_VERSION}
ARG DENO_DIGEST=""
ARG RUNTIME_DIGEST=""

FROM denoland/deno:\${DENO_VERSION}\${DENO_DIGEST} AS build
${copy}
RUN deno install --frozen && deno task build

FROM gcr.io/distroless/cc-debian12:nonroot\${RUNTIME_DIGEST}
COPY --from=build /src/${local ? `${local.project}/` : ""}dist/operator /usr/local/bin/operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/operator"]
CMD ["--all-namespaces", "--standalone"]
`;
}

function readme(
  name: string,
  group: string,
  kind: string,
  plural: string,
  crdPath: string,
  kopf: string | undefined,
): string {
  const deno = kopf
    ? `Deno: \`deno\` below is Deno ${PINNED_DENO_VERSION}; without it on PATH, use ` +
      `\`${kopf}/tools/deno.sh\` in its place (the framework's checkout: it installs and runs the ` +
      `pinned Deno).`
    : `Deno: \`deno\` below is Deno ${PINNED_DENO_VERSION} ` +
      "(https://docs.deno.com/runtime/getting_started/installation/). The framework comes from JSR " +
      "(`jsr:@kopf/ts`).";
  return `# ${name}

A Kubernetes operator for \`${kind}\` objects, made with Kopf for Deno.

${wrap(deno)}

${
    table([
      ["Task", "What it does"],
      ["`deno task test`", "the handlers' test, on an in-memory Kubernetes API"],
      [
        "`deno task dev`",
        "type-checks `handlers.ts`, then the operator on an in-memory Kubernetes API with `crds/` " +
        "applied",
      ],
      ["`deno task run`", "the operator against the current kubeconfig's cluster"],
      ["`deno task types`", `\`types.ts\` from \`${crdPath}\` (after changing the CRD)`],
      ["`deno task rbac`", "`deploy/rbac.yaml`: exactly the permissions the handlers need"],
      ["`deno task build`", "`dist/operator`: one binary (`deno compile`)"],
      ["`deno task kopf …`", "this project's `kopf` command, e.g. `deno task kopf run --help`"],
    ])
  }

${
    wrap(
      `Deploy: \`kubectl apply -f ${crdPath}\`, build the image (see the Dockerfile), then ` +
        `\`kubectl create namespace ${name} && kubectl apply -n ${name} -f deploy/\`.`,
    )
  }

Try it: \`deno task dev\` prints a \`KUBECONFIG\` for a second terminal, where

\`\`\`sh
kubectl create -f - <<'EOF'
{"apiVersion": "${group}/v1", "kind": "${kind}", "metadata": {"name": "first"}, "spec": {"size": "small"}}
EOF
kubectl get ${plural}
\`\`\`
`;
}

/** A paragraph filled to 100 columns, as `deno fmt` fills Markdown prose (code spans whole). */
function wrap(text: string, width = 100): string {
  const lines: string[] = [];
  for (const word of text.match(/(?:[^\s`]|`[^`]*`)+/g) ?? []) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last]!.length + 1 + word.length <= width) lines[last] += ` ${word}`;
    else lines.push(word);
  }
  return lines.join("\n");
}

/** A Markdown table with its columns aligned, as `deno fmt` writes it. */
function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(rows[0]!), line(widths.map((w) => "-".repeat(w))), ...rows.slice(1).map(line)]
    .join("\n");
}
