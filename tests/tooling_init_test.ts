/**
 * `kopf init` (X-TOOL-06): a new project whose own `deno task test` passes right after
 * creation, whose checked-in types and RBAC are what its `types` and `rbac` tasks generate, whose
 * build reaches `deno compile`, and whose Deployment and RBAC the API server accepts. Bad input
 * gets one line.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { main } from "../core/api/cli.ts";
import { projectFiles } from "../core/api/generate/init.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { tempDir, testClient } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** Runs a command in a directory, to its exit. */
async function run(cwd: string, args: string[]): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { NO_COLOR: "1", DENO: Deno.execPath() },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, output: text };
}

/** `kopf ARGS` in-process, with its output lines. */
async function kopf(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await main(args, { write: (line) => lines.push(line) });
  return { code, lines };
}

Deno.test(
  "kopf init: the new project's own tests pass at once; its types and RBAC are what its tasks generate; its build reaches deno compile (X-TOOL-06)",
  opts,
  async () => {
    await using dir = await tempDir();
    const project = `${dir.path}/shop-operator`;
    const made = await kopf([
      "init",
      project,
      "--kopf",
      ROOT,
      "--group",
      "shop.example.com",
      "--kind",
      "Order",
    ]);
    assert.equal(made.code, 0, made.lines.join("\n"));
    for (
      const file of [
        "deno.json",
        "kopf.ts",
        "crds/orders.yaml",
        "types.ts",
        "handlers.ts",
        "handlers_test.ts",
        "deploy/rbac.yaml",
        "deploy/deployment.yaml",
        "Dockerfile",
        "README.md",
      ]
    ) {
      assert.ok((await Deno.stat(`${project}/${file}`)).isFile, file);
    }

    const tested = await run(project, ["task", "test"]);
    assert.equal(tested.code, 0, tested.output);
    assert.match(tested.output, /1 passed/);

    // The checked-in generated files are what the project's own tasks generate.
    for (const [task, file] of [["types", "types.ts"], ["rbac", "deploy/rbac.yaml"]]) {
      const before = await Deno.readTextFile(`${project}/${file}`);
      const again = await run(project, ["task", task!]);
      assert.equal(again.code, 0, again.output);
      assert.equal(await Deno.readTextFile(`${project}/${file}`), before, `deno task ${task}`);
    }
    const checked = await run(project, ["check", "handlers.ts", "kopf.ts"]);
    assert.equal(checked.code, 0, checked.output);

    // The build task goes up to deno compile (whose runtime download may be impossible here).
    const built = await run(project, ["task", "build"]);
    assert.ok(
      built.code === 0 || /could not download its runtime \(denort\)/.test(built.output),
      built.output,
    );
    assert.doesNotMatch(built.output, /TS\d+ \[ERROR\]/);

    // The API server accepts the CRD, the RBAC and the Deployment (server-side dry run).
    using client = await testClient();
    const docs = [
      ...parseAllDocuments(await Deno.readTextFile(`${project}/deploy/rbac.yaml`)),
      ...parseAllDocuments(await Deno.readTextFile(`${project}/deploy/deployment.yaml`)),
    ].map((d) => d.toJSON() as KubeObject).filter(Boolean);
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"],
    );
    for (const doc of docs) {
      const [group, version] = doc.apiVersion!.includes("/")
        ? doc.apiVersion!.split("/")
        : ["", doc.apiVersion!];
      const plural = `${doc.kind!.toLowerCase()}s`;
      const namespaced = doc.kind !== "ClusterRole" && doc.kind !== "ClusterRoleBinding";
      await client.http.json({
        method: "POST",
        path: `${group ? `/apis/${group}` : "/api"}/${version}${
          namespaced ? "/namespaces/default" : ""
        }/${plural}`,
        query: { dryRun: "All" },
        body: namespaced ? { ...doc, metadata: { ...doc.metadata, namespace: "default" } } : doc,
      });
    }
  },
);

Deno.test("kopf init: bad input gets one clear line; the default imports the framework from JSR (X-TOOL-06)", async () => {
  await using dir = await tempDir();
  await Deno.mkdir(`${dir.path}/taken`);
  for (
    const [args, message] of [
      [["init", `${dir.path}/taken`], /error: .*taken exists already; choose another name/],
      [["init", `${dir.path}/Bad_Name`], /error: The project name 'Bad_Name' must be a DNS label/],
      [
        ["init", `${dir.path}/ok`, "--kind", "lower"],
        /error: The kind 'lower' must be in PascalCase/,
      ],
      [["init", `${dir.path}/ok`, "--kopf", `${dir.path}/none`], /error: No such directory: /],
      [["init"], /error: Give one project name/],
    ] as const
  ) {
    const result = await kopf([...args]);
    assert.equal(result.code, 1, args.join(" "));
    assert.equal(result.lines.length, 1, result.lines.join("\n"));
    assert.match(result.lines[0]!, message);
  }
  const files = await projectFiles({ name: "x", version: "1.2.3" });
  const config = JSON.parse(files.get("deno.json")!);
  assert.deepEqual(config.imports, { "@kopf/ts": "jsr:@kopf/ts@^1.2.3" });
  assert.match(files.get("kopf.ts")!, /from "@kopf\/ts\/cli"/);
});
