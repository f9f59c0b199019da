/**
 * `kopf init` (X-TOOL-06): a new project whose own `deno task test` passes right after
 * creation, whose checked-in types and RBAC are what its `types` and `rbac` tasks generate, whose
 * build reaches `deno compile`, and whose Deployment and RBAC the API server accepts. Bad input
 * gets one line.
 */

import assert from "node:assert/strict";
import { relative } from "node:path";
import { parseAllDocuments } from "yaml";
import { main } from "../core/cli/main.ts";
import { PINNED_DENO_VERSION, projectFiles } from "../core/cli/generate/init.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { captureLines, eventually, tempDir, terminate, testClient } from "./_support.ts";

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

/** A PATH without any `deno`: the commands `kopf init` prints must work with it. */
const NO_DENO_PATH = "/usr/local/bin:/usr/bin:/bin";

/** Runs a shell command line as printed, to its exit, with no `deno` on PATH. */
async function shell(cwd: string, line: string): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command("bash", {
    args: ["-c", line],
    cwd,
    env: { PATH: NO_DENO_PATH, NO_COLOR: "1", HOME: Deno.env.get("HOME") ?? "/tmp" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, output: text };
}

/** The commands of the "Next:" lines `kopf init` prints, without their comments. */
function nextCommands(output: string): string[] {
  const lines = output.split("\n");
  return lines.slice(lines.indexOf("Next:") + 1).filter((l) => l.startsWith("  "))
    .map((l) => l.replace(/#.*$/, "").trim());
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
    // As a user without Deno would: through tools/kopf, with no `deno` on PATH.
    const made = await shell(
      dir.path,
      `${ROOT}/tools/kopf init shop-operator --kopf ${ROOT} --group shop.example.com --kind Order`,
    );
    assert.equal(made.code, 0, made.output);
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

    // deno.json names the checkout by a relative path (moving both together keeps it working).
    const config = JSON.parse(await Deno.readTextFile(`${project}/deno.json`));
    assert.equal(config.imports["@kopf/ts"], `${relative(project, ROOT)}/mod.ts`);
    // Every export of the package resolves in the project, to the checkout's module.
    const exported = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).exports;
    for (const [sub, target] of Object.entries(exported as Record<string, string>)) {
      const name = sub === "." ? "@kopf/ts" : `@kopf/ts/${sub.slice(2)}`;
      assert.equal(config.imports[name], `${relative(project, ROOT)}/${target.slice(2)}`, name);
    }
    assert.ok(Object.values(config.imports).every((v) => !String(v).startsWith("/")));
    assert.match(config.tasks.dev, /--embedded --standalone --all-namespaces /);
    const readme = await Deno.readTextFile(`${project}/README.md`);
    assert.ok(readme.includes(`\`${relative(project, ROOT)}/tools/deno.sh\``), readme);
    assert.ok(!readme.includes(` ${ROOT}/`) && !readme.includes(`\`${ROOT}/`), "absolute path");
    // The Dockerfile builds with the framework's pinned Deno.
    const pinned = /^DENO_VERSION="([\d.]+)"$/m.exec(
      await Deno.readTextFile(`${ROOT}/tools/deno.sh`),
    );
    assert.equal(PINNED_DENO_VERSION, pinned?.[1]);
    assert.match(
      await Deno.readTextFile(`${project}/Dockerfile`),
      new RegExp(`^ARG DENO_VERSION=${PINNED_DENO_VERSION}$`, "m"),
    );
    // deno fmt-clean at the project's own settings.
    const formatted = await run(project, ["fmt", "--check"]);
    assert.equal(formatted.code, 0, formatted.output);

    // The printed commands run as printed, with no deno on PATH: cd, the tests, the dev run.
    const [cd, test, dev] = nextCommands(made.output);
    assert.equal(cd, "cd shop-operator", made.output);
    assert.doesNotMatch(test!, /^deno /, "no deno on PATH: not a bare deno");
    const tested = await shell(dir.path, `${cd} && ${test}`);
    assert.equal(tested.code, 0, tested.output);
    assert.match(tested.output, /1 passed/);
    const child = new Deno.Command("bash", {
      args: ["-c", `${cd} && exec ${dev}`],
      cwd: dir.path,
      env: { PATH: NO_DENO_PATH, NO_COLOR: "1", HOME: Deno.env.get("HOME") ?? "/tmp" },
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
    }).spawn();
    const running = captureLines(child);
    try {
      await eventually(
        () => running.lines.find((l) => /Watching orders\.v1\.shop\.example\.com/.test(l)),
        60_000,
        `the dev run watching orders; got:\n${running.lines.join("\n")}`,
      );
      assert.ok(running.lines.includes("Applied crds/orders.yaml: orders.shop.example.com."));
      assert.ok(running.lines.some((l) => /^ +kubectl get orders$/.test(l)));
      // --standalone, -A: no peering warning, no -n/-A warning; nothing else to warn about.
      assert.deepEqual(running.lines.filter((l) => /WARNING|ERROR/.test(l)), []);
    } finally {
      // `deno task` runs the operator as its child: stop that child too, by its pid.
      const children = await Deno.readTextFile(`/proc/${child.pid}/task/${child.pid}/children`)
        .catch(() => "");
      for (const pid of children.split(/\s+/).filter(Boolean)) {
        try {
          Deno.kill(Number(pid), "SIGTERM");
        } catch { /* gone */ }
      }
      await terminate(child, running.exited);
    }

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

Deno.test(
  "kopf init: the dev task type-checks the handlers first: a type error stops it with its file:line before any operator starts",
  opts,
  async () => {
    await using dir = await tempDir();
    const project = `${dir.path}/typo-operator`;
    assert.equal((await kopf(["init", project, "--kopf", ROOT])).code, 0);
    const handlers = await Deno.readTextFile(`${project}/handlers.ts`);
    const line = handlers.split("\n").length; // the new line's number (the file ends with "\n")
    await Deno.writeTextFile(
      `${project}/handlers.ts`,
      `${handlers}export const n: number = "x";\n`,
    );
    // Bounded: were the check skipped, the operator would run until this kills it.
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "dev"],
      cwd: project,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const output = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.notEqual(out.code, 0, output);
    assert.match(output, /TS2322 \[ERROR\]: Type 'string' is not assignable to type 'number'/);
    assert.match(output, new RegExp(`/typo-operator/handlers\\.ts:${line}:\\d+`), output);
    assert.doesNotMatch(output, /KUBECONFIG|Watching|Applied crds/, output);
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

Deno.test(
  "kopf init without --kopf says how to proceed when JSR does not answer (X-TOOL-06)",
  opts,
  async () => {
    await using dir = await tempDir();
    // A registry that refuses connections stands for an unreachable or unpublished JSR.
    const made = await shell(
      dir.path,
      `KOPF_TS_JSR_URL=http://127.0.0.1:1 ${ROOT}/tools/kopf init from-jsr`,
    );
    assert.equal(made.code, 0, made.output);
    assert.match(
      made.output,
      new RegExp(
        "^note: the project imports jsr:@kopf/ts@\\^[\\d.]+, but http://127\\.0\\.0\\.1:1 does not " +
          `answer .*Make it from a local checkout instead: rm -r from-jsr && kopf init from-jsr --kopf ${ROOT}\\.$`,
        "m",
      ),
    );
  },
);
