/**
 * The files `kopf init` writes into a new project, as text: the CRD, the handlers and their test
 * on the in-memory emulator, the RBAC and Deployment manifests, the Dockerfile and the README.
 * Pure functions of the project's name, resource and framework source (init.ts works those out).
 * @module
 */

import { stringify } from "yaml";
import { typedResource } from "../../intents/typed_resources.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { on } from "../../api/on.ts";
import { rbacDocuments, renderYaml, requiredPermissions, resourcesOfCrds } from "./rbac.ts";

/** Where a project that imports a local checkout is built from: their common directory. */
export interface BuildContext {
  /** The context directory, relative to the project. */
  readonly context: string;
  /** The project's directory within the context. */
  readonly project: string;
  /** The checkout's directory within the context. */
  readonly checkout: string;
}

/**
 * The project's CustomResourceDefinition: a namespaced kind with a `size` and a `replicas` in its
 * spec, a status subresource, and printer columns.
 *
 * @param group The API group.
 * @param kind The kind, in PascalCase.
 * @param singular The kind in lower case.
 * @param plural The resource's plural name.
 * @returns The CRD object.
 */
export function crdOf(group: string, kind: string, singular: string, plural: string): KubeObject {
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

/**
 * The CRD's file: a comment on what to regenerate after a change, then the CRD as YAML.
 *
 * @param crd The CRD (from {@link crdOf}).
 * @returns The YAML text.
 */
export function crdYaml(crd: KubeObject): string {
  return `# The custom resource of this operator. After a change, run \`deno task types\` (types.ts)
# and \`deno task rbac\` (deploy/rbac.yaml).\n${stringify(crd)}`;
}

/**
 * `handlers.ts`: a create, an update and a delete handler for the kind.
 *
 * @param kind The kind, in PascalCase.
 * @param constant The name of the kind's typed resource in `types.ts`.
 * @returns The module's text.
 */
export function handlersTs(kind: string, constant: string): string {
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

/**
 * `handlers_test.ts`: the handlers run by `KopfRunner` against the in-memory emulator, through an
 * object's creation, change and deletion.
 *
 * @param group The API group.
 * @param kind The kind, in PascalCase.
 * @param constant The name of the kind's typed resource in `types.ts`.
 * @param crdPath The CRD's file, relative to the project.
 * @returns The module's text.
 */
export function testTs(group: string, kind: string, constant: string, crdPath: string): string {
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

/**
 * `deploy/rbac.yaml`: the permissions of the handlers in `handlers.ts`, as `deno task rbac`
 * generates them.
 *
 * @param crd The CRD (from {@link crdOf}).
 * @param group The API group.
 * @param singular The kind in lower case (the handlers' ids end with it).
 * @param plural The resource's plural name.
 * @param name The project's name: the ServiceAccount's name and namespace.
 * @param args The arguments of `kopf generate rbac` that write the same, for the header.
 * @returns The YAML text.
 */
export function rbacYaml(
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

/**
 * `deploy/deployment.yaml`: the operator's image as a one-replica Deployment with a liveness probe.
 *
 * @param name The project's name: the Deployment, its ServiceAccount and its image.
 * @returns The YAML text.
 */
export function deploymentYaml(name: string): string {
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

/**
 * The `Dockerfile`: `kopf build` in a Deno image, its binary in a distroless one.
 *
 * @param name The project's name: the image's.
 * @param denoVersion The Deno image's tag.
 * @param local Where to build from when the project imports a local checkout beside it.
 * @returns The Dockerfile's text.
 */
export function dockerfile(name: string, denoVersion: string, local?: BuildContext): string {
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
ARG DENO_VERSION=${denoVersion}
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

/**
 * `README.md`: which Deno to use, the project's tasks, how to deploy and to try it.
 *
 * @param name The project's name.
 * @param group The API group.
 * @param kind The kind, in PascalCase.
 * @param plural The resource's plural name.
 * @param crdPath The CRD's file, relative to the project.
 * @param kopf The local checkout as `deno.json` imports it, or `undefined` for JSR.
 * @param denoVersion The Deno the project is meant for.
 * @returns The Markdown text.
 */
export function readme(
  name: string,
  group: string,
  kind: string,
  plural: string,
  crdPath: string,
  kopf: string | undefined,
  denoVersion: string,
): string {
  const deno = kopf
    ? `Deno: \`deno\` below is Deno ${denoVersion}; without it on PATH, use ` +
      `\`${kopf}/tools/deno.sh\` in its place (the framework's checkout: it installs and runs the ` +
      `pinned Deno).`
    : `Deno: \`deno\` below is Deno ${denoVersion} ` +
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
