/**
 * `kopf generate types`: CRD schemas become TypeScript types (required/optional, enums,
 * int-or-string, open records, nullable, maps, arrays, descriptions) and typed resource
 * constants; generated files plug into handlers and catch wrong fields at compile time; the
 * CRDs can also be read from the real cluster.
 */

import assert from "node:assert/strict";
import { main } from "../core/api/cli.ts";
import { applyCrds, kubeconfigPath, tempDir, testClient } from "./_support.ts";

const here = (path: string) => decodeURIComponent(new URL(path, import.meta.url).pathname);
const MOD = new URL("../mod.ts", import.meta.url).href;
const CONFIG = here("../deno.json");

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
  expect(/export const Widgets: TypedResource<Widget> = typedResource<Widget>\(/);
  // Another served version gets its own names; no schema → open records.
  expect(/export interface WidgetV1Beta1 extends TypedObject<WidgetV1Beta1Spec,/);
  expect(/export type WidgetV1Beta1Spec = Record<string, unknown>;/);
  expect(/export const WidgetsV1Beta1: TypedResource<WidgetV1Beta1>/);

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
  assert.match(
    out,
    /^import \{ type TypedObject, type TypedResource, typedResource \} from "@kopf\/ts";$/m,
  );
  assert.match(
    out,
    /export interface KopfExample extends TypedObject<KopfExampleSpec, KopfExampleStatus>/,
  );
  assert.match(out, /export const KopfExamples: TypedResource<KopfExample>/);
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
