/**
 * `kopf generate types`: CRD schemas become TypeScript types (required/optional, enums,
 * int-or-string, open records, nullable, maps, arrays, descriptions) and typed resource
 * constants; generated files plug into handlers and catch wrong fields at compile time; the
 * CRDs can also be read from the real cluster. The module of a large CRD passes `deno lint` and
 * `deno fmt --check`; its constants type the client's calls, its objects go into `adopt()`
 * outside handlers, and field handlers get `old`/`new` typed by the path (issue 30).
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { generateTypes, readCrdFiles } from "../core/cli/generate/types.ts";
import type { KubeClient } from "../core/client/client.ts";
import { assertCompileErrors } from "./_typecheck.ts";
import { applyCrds, kubeconfigPath, tempDir, testClient, testNamespace } from "./_support.ts";

const here = (path: string) => decodeURIComponent(new URL(path, import.meta.url).pathname);
const MOD = new URL("../mod.ts", import.meta.url).href;
const KITS = new URL("../kits/", import.meta.url).href;
const CONFIG = here("../deno.json");
const BIG_CRD = here("./fixtures/big-crd.yaml");

/** Runs `deno ARGS` in a directory (its configuration applies), to its exit. */
async function deno(cwd: string, ...args: string[]): Promise<{ ok: boolean; output: string }> {
  const result = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { ok: result.success, output: decode(result.stdout) + decode(result.stderr) };
}

async function kopf(...args: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await main(args, { write: (line) => lines.push(line) });
  return { code, out: lines.join("\n") };
}

async function check(file: string): Promise<{ ok: boolean; output: string }> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--quiet", "--config", CONFIG, file],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { ok: result.success, output: decode(result.stdout) + decode(result.stderr) };
}

Deno.test("kopf generate types maps CRD schemas to TypeScript (X-TOOL-01)", async () => {
  await using dir = await tempDir();
  const out = `${dir.path}/types.ts`;
  const { code, out: said } = await kopf(
    "generate",
    "types",
    here("./types/widgets.yaml"),
    "-o",
    out,
    "--import",
    MOD,
  );
  assert.equal(code, 0, said);
  const text = await Deno.readTextFile(out);
  const expect = (pattern: RegExp) => assert.match(text, pattern);
  expect(/export interface Widget extends TypedObject<WidgetSpec, WidgetStatus> \{/);
  expect(/apiVersion\?: "example\.com\/v1";\n\s+kind\?: "Widget";/);
  expect(/^\s+size: number;$/m); // required
  expect(/How big\.\n\s+\*\n\s+\* Format: `int32`\./); // description and format as docs
  expect(/^\s+mode\?: "fast" \| "slow";$/m); // enum, optional
  expect(/^\s+port\?: number \| string;$/m); // int-or-string
  expect(/^\s+note\?: string \| null;$/m); // nullable
  expect(/^\s+labels\?: \{\n\s+\[k: string\]: string;\n\s+\};$/m); // map
  expect(/^\s+tags\?: string\[\];$/m);
  expect(/^\s+extra\?: unknown;$/m); // preserve-unknown-fields without a type
  expect(/template\?: \{\n\s+apiVersion\?: string;\n\s+kind\?: string;/); // embedded resource
  // The constant is a full resource reference: what handlers and the client need.
  expect(
    /export const Widgets = typedResource<Widget>\(\{\n {2}group: "example\.com",\n {2}version: "v1",\n {2}plural: "widgets",\n {2}kind: "Widget",\n {2}namespaced: true,\n\}\);/,
  );
  // Another served version gets its own names; no schema → open records.
  expect(/export interface WidgetV1Beta1\s+extends TypedObject<WidgetV1Beta1Spec,/);
  expect(/export type WidgetV1Beta1Spec = Record<string, unknown>;/);
  expect(/export const WidgetsV1Beta1 = typedResource<WidgetV1Beta1>\(\{/);

  // The generated module plugs into handlers: right fields compile, wrong ones do not.
  const use = (body: string) =>
    `import { on } from "${MOD}";
import { type Widget, Widgets } from "./types.ts";
${body}
`;
  await Deno.writeTextFile(
    `${dir.path}/ok.ts`,
    use(`on.create(Widgets, ({ spec, status, patch }) => {
  const size: number = spec.size;
  patch.status.phase = status.phase ?? String(size + Number(spec.port ?? 0));
});
on.update<Widget>("widgets", ({ spec }) => spec.tags?.map((t) => t.toUpperCase()));`),
  );
  const ok = await check(`${dir.path}/ok.ts`);
  assert.ok(ok.ok, ok.output);
  await Deno.writeTextFile(
    `${dir.path}/wrong.ts`,
    use(`on.create(Widgets, ({ spec }) => spec.sise);
on.create(Widgets, ({ patch }) => { patch.status.phaze = "x"; });
on.create<Widget>("widgets", ({ spec }) => { const m: "fast" | "slow" = spec.mode; return m; });`),
  );
  const wrong = await check(`${dir.path}/wrong.ts`);
  assert.ok(!wrong.ok);
  assert.match(wrong.output, /Property 'sise' does not exist/);
  assert.match(wrong.output, /Property 'phaze' does not exist/);
  assert.match(wrong.output, /'"fast" \| "slow" \| undefined' is not assignable/);
});

Deno.test("kopf generate types: bad input is one clear error line (X-TOOL-01)", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["generate", "types"], /^error: Give CRD files, or --from-cluster/],
    [["generate", "types", "no-such.yaml"], /^error: Cannot read no-such\.yaml: /],
    [["generate", "types", here("../deploy/rbac.yaml")], /^error: No CustomResourceDefinition in /],
    [["generate", "typez"], /^error: Unknown generator 'typez'; use types, builtins or rbac$/],
    [["generate", "types", "--bogus"], /^error: Unknown option '--bogus'.*kopf generate --help/],
  ];
  for (const [args, pattern] of cases) {
    const { code, out } = await kopf(...args);
    assert.equal(code, 1, out);
    assert.match(out, pattern);
    assert.equal(out.split("\n").length, 1, out);
  }
});

Deno.test("kopf generate types --from-cluster reads the CRDs from the API server (X-TOOL-01)", async () => {
  using client = await testClient();
  await applyCrds(client, here("../crds/example.yaml"));
  const kubeconfig = await kubeconfigPath();
  const { code, out } = await kopf(
    "generate",
    "types",
    "--from-cluster",
    "kopfexamples.kopf.dev",
    "--kubeconfig",
    kubeconfig,
  );
  assert.equal(code, 0, out);
  assert.match(out, /^import \{ type TypedObject, typedResource \} from "@kopf\/ts";$/m);
  assert.match(
    out,
    /export interface KopfExample extends TypedObject<KopfExampleSpec, KopfExampleStatus>/,
  );
  assert.match(out, /export const KopfExamples = typedResource<KopfExample>\(\{/);
  assert.doesNotMatch(out, /interface KopfPeering/); // only the named CRD
  const missing = await kopf(
    "generate",
    "types",
    "--from-cluster",
    "nopes.example.com",
    "--kubeconfig",
    kubeconfig,
  );
  assert.equal(missing.code, 1);
  assert.equal(missing.out, "error: No such CRD in the cluster: nopes.example.com");
});

Deno.test("kopf generate types: a large CRD's module passes deno lint and deno fmt --check, at the project's line width and at Deno's default (issue 30)", async () => {
  await using dir = await tempDir();
  for (const [project, config] of [["wide", { fmt: { lineWidth: 100 } }], ["plain", undefined]]) {
    const path = `${dir.path}/${project}`;
    await Deno.mkdir(path);
    if (config) await Deno.writeTextFile(`${path}/deno.json`, JSON.stringify(config));
    const made = await kopf(
      "generate",
      "types",
      BIG_CRD,
      "-o",
      `${path}/types.ts`,
      "--import",
      MOD,
    );
    assert.equal(made.code, 0, made.out);
    const text = await Deno.readTextFile(`${path}/types.ts`);
    assert.doesNotMatch(text, /: \{\};/); // `{}` is "anything but null" (lint: ban-types)
    assert.match(text, /^ {4}emptyDir\?: Record<string, never>;$/m);
    assert.match(text, /^ {2}paintedColor\?: string;$/m);
    const fmt = await deno(path, "fmt", "--check", "types.ts");
    assert.ok(fmt.ok, `${project}: ${fmt.output}`);
    const lint = await deno(path, "lint", "types.ts");
    assert.ok(lint.ok, `${project}: ${lint.output}`);
  }
  // Laid out by the generator itself (where deno fmt cannot run, e.g. in a compiled binary).
  const crds = await readCrdFiles([BIG_CRD, here("./types/widgets.yaml")]);
  const own = await generateTypes(crds, { importFrom: MOD, lineWidth: 100, denoFmt: false });
  await Deno.writeTextFile(`${dir.path}/wide/own.ts`, own);
  const fmt = await deno(`${dir.path}/wide`, "fmt", "--check", "own.ts");
  assert.ok(fmt.ok, fmt.output);
  const lint = await deno(`${dir.path}/wide`, "lint", "own.ts");
  assert.ok(lint.ok, lint.output);
  const checked = await deno(`${dir.path}/wide`, "check", "--config", CONFIG, "types.ts");
  assert.ok(checked.ok, checked.output);
});

Deno.test("kopf generate types: the constants type the client (status fields read without a cast), adopt() takes the objects outside a handler, field handlers get typed old/new and a wrong path is a type error (issue 30)", async () => {
  await using dir = await tempDir();
  const made = await kopf(
    "generate",
    "types",
    BIG_CRD,
    "-o",
    `${dir.path}/types.ts`,
    "--import",
    MOD,
  );
  assert.equal(made.code, 0, made.out);
  // What a user's test does with the generated types, with no cast and no type argument.
  await Deno.writeTextFile(
    `${dir.path}/use.ts`,
    `import type { KubeClient } from "${MOD}";
import { adopt } from "${KITS}hierarchies.ts";
import { type ConfigMap, ConfigMaps } from "${KITS}builtins.ts";
import { type DatabaseCluster, DatabaseClusters } from "./types.ts";

export async function use(client: KubeClient, namespace: string) {
  const body: DatabaseCluster = {
    apiVersion: "db.example.com/v1",
    kind: "DatabaseCluster",
    metadata: { name: "db1" },
    spec: { instances: 2, storage: { size: "1Gi", accessModes: ["ReadWriteOnce"] } },
  };
  await client.api.create(DatabaseClusters, body, { namespace });
  await client.api.patch(DatabaseClusters, "db1", { status: { paintedColor: "blue" } }, {
    namespace,
    subresource: "status",
  });
  const live = await client.api.get(DatabaseClusters, "db1", { namespace });
  const painted: string | undefined = live.status?.paintedColor;
  const { items } = await client.api.list(DatabaseClusters, { namespace });
  const instances: number | undefined = items[0]?.spec?.instances;
  const child: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", data: { color: painted ?? "" } };
  adopt(child, live); // outside a handler: the owner is explicit
  const stored = await client.api.create(ConfigMaps, child);
  return { painted, instances, owners: stored.metadata?.ownerReferences, uid: live.metadata?.uid };
}
`,
  );
  await Deno.writeTextFile(
    `${dir.path}/fields.ts`,
    `import { on, OperatorRegistry } from "${MOD}";
import { DatabaseClusters } from "./types.ts";
const registry = new OperatorRegistry();
on.field(DatabaseClusters, { registry, field: "spec.instances" }, ({ old, new: now }) => {
  const before: number | undefined = old;
  const after: number | undefined = now;
  return { added: (after ?? 0) - (before ?? 0) };
});
on.field(DatabaseClusters, { registry, field: "spec.users.admin.roles" }, ({ new: now }) => {
  return { superuser: now?.includes("superuser") ?? false };
});
on.field(DatabaseClusters, { registry, field: "spec.storage.selector.matchLabels.tier" }, ({ new: now }) => now?.toUpperCase());
on.update(DatabaseClusters, { registry, field: "spec.engine" }, ({ new: now }) => now === "mysql");
`,
  );
  await Deno.writeTextFile(
    `${dir.path}/wrong.ts`,
    `import { on, OperatorRegistry } from "${MOD}";
import { DatabaseClusters } from "./types.ts";
const registry = new OperatorRegistry();
on.field(DatabaseClusters, { registry, field: "spec.instancez" }, () => {}); // expected error
on.field(DatabaseClusters, { registry, field: "spec.storage.sise" }, () => {}); // expected error
on.field(DatabaseClusters, { registry, field: "status.paintedColor" }, () => {}); // expected error
on.field(DatabaseClusters, { registry, field: "spec.instances" }, ({ new: now }) => now?.trim()); // expected error
on.field(DatabaseClusters, { registry, field: "spec.engine" }, ({ old }) => old === "oracle"); // expected error
`,
  );
  for (const file of ["use.ts", "fields.ts"]) {
    const checked = await check(`${dir.path}/${file}`);
    assert.ok(checked.ok, `${file}: ${checked.output}`);
  }
  await assertCompileErrors(new URL(`file://${dir.path}/wrong.ts`), 5, { config: CONFIG });

  // And it works against the API server: the constant addresses the objects in their namespace.
  using client = await testClient();
  await applyCrds(client, BIG_CRD);
  const namespace = await testNamespace("types");
  const module = await import(`file://${dir.path}/use.ts`) as {
    use(client: KubeClient, namespace: string): Promise<{
      painted?: string;
      instances?: number;
      owners?: { kind: string; name: string; uid: string; controller?: boolean }[];
      uid?: string;
    }>;
  };
  const result = await module.use(client, namespace);
  assert.equal(result.painted, "blue");
  assert.equal(result.instances, 2);
  assert.deepEqual(
    result.owners?.map(({ kind, name, uid, controller }) => ({ kind, name, uid, controller })),
    [{ kind: "DatabaseCluster", name: "db1", uid: result.uid, controller: true }],
  );
});
