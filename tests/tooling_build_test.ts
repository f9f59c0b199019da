/**
 * `kopf build` (X-TOOL-07), tested up to `deno compile`'s runtime download (which this machine
 * cannot make): the entry module it writes runs the operator as the binary would (`kopf run`
 * with the handler files, addressed relative to the entry, plus the given options); the
 * `deno compile` command carries the handler files with `--include`; the compilation either
 * makes a binary or fails with one clear line; the Dockerfile builds with it.
 */

import assert from "node:assert/strict";
import { compileFailure, planBuild } from "../core/cli/generate/build.ts";
import { spawnDeno } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** `deno run -A cli.ts ARGS` in the repository, to its exit. */
async function kopf(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", "cli.ts", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", DENO: Deno.execPath() },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test(
  "kopf build: the entry module it writes runs the operator with the handler files and the given options (X-TOOL-07)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("build");
    const printed = await kopf(["build", "examples/01-minimal/example.ts", "--print"]);
    assert.equal(printed.code, 0, printed.stderr);
    const entryPath = `${ROOT}/.kopf/build/main.ts`;
    const entry = await Deno.readTextFile(entryPath);
    assert.match(
      entry,
      /new URL\("\.\.\/\.\.\/examples\/01-minimal\/example\.ts", import\.meta\.url\)/,
    );

    // The entry is what the binary runs: started as a script, it is `kopf run` with the handlers.
    await using op = await spawnDeno([entryPath, "-n", namespace, "--standalone"]);
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "built" },
      spec: { field: "value" },
    }, { namespace });
    await eventually(
      async () => {
        const object = await client.api.get(KOPFEXAMPLES, "built", { namespace });
        return (object.status as Record<string, unknown> | undefined)?.["create_fn"] !== undefined;
      },
      30_000,
      `the example's create handler; output:\n${op.lines.join("\n")}`,
    );
    assert.equal(await op.stop(), 0);
  },
);

Deno.test(
  "kopf build: the deno compile command includes the handler files; the compilation makes a binary or fails with one clear line; the Dockerfile builds with it (X-TOOL-07)",
  opts,
  async () => {
    const printed = await kopf([
      "build",
      "examples/01-minimal/example.ts",
      "examples/04-events/example.ts",
      "-o",
      "/tmp/kopf-build-test/op",
      "--target",
      "x86_64-unknown-linux-gnu",
      "--print",
    ]);
    assert.equal(printed.code, 0, printed.stderr);
    const words = printed.stdout.trim().split(" ");
    assert.equal(words[0], Deno.execPath());
    assert.deepEqual(words.slice(1), [
      "compile",
      "-A",
      "--no-code-cache",
      "--v8-flags=--max-semi-space-size=8,--maglev-as-top-tier,--expose-gc,--heap-growing-percent=40",
      "--include",
      `${ROOT}/examples/01-minimal/example.ts`,
      "--include",
      `${ROOT}/examples/04-events/example.ts`,
      "--output",
      "/tmp/kopf-build-test/op",
      "--target",
      "x86_64-unknown-linux-gnu",
      `${ROOT}/.kopf/build/main.ts`,
    ]);

    await using dir = await tempDir();
    const built = await kopf(["build", "examples/01-minimal/example.ts", "-o", `${dir.path}/op`]);
    if (built.code === 0) {
      // The runtime could be downloaded: the binary is kopf run with the handlers.
      const help = await new Deno.Command(`${dir.path}/op`, { args: ["--help"] }).output();
      assert.match(new TextDecoder().decode(help.stdout), /Usage: kopf run/);
    } else {
      const errors = built.stderr.split("\n").filter((l) => l.startsWith("error:"));
      assert.equal(errors.length, 1, built.stderr);
      assert.match(
        errors[0]!,
        /^error: deno compile could not download its runtime \(denort\) from dl\.deno\.land .*DENORT_BIN/,
      );
      assert.doesNotMatch(built.stderr, /Stack backtrace|Caused by/);
    }

    // Bad input: one line each.
    const missing = await kopf(["build", "no/such/handlers.ts"]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr.trim(), "error: No such file: no/such/handlers.ts");
    assert.match(
      compileFailure(
        'Check main.ts\nTS2307 [ERROR]: Import "x" not a dependency\n    at file:///a.ts:1:8\n\nerror: Type checking failed.\n',
      ),
      /^deno compile failed: TS2307 \[ERROR\]: Import "x" not a dependency at file:\/\/\/a\.ts:1:8$/,
    );

    // The Dockerfile makes its binary with kopf build, and runs it as the entrypoint.
    const dockerfile = await Deno.readTextFile(`${ROOT}/Dockerfile`);
    assert.match(
      dockerfile,
      /tools\/deno\.sh run -A cli\.ts build "\$\{HANDLERS\}" --output \/out\/kopf/,
    );
    assert.match(dockerfile, /ENTRYPOINT \["\/usr\/local\/bin\/kopf"\]/);
    const plan = planBuild({ handlers: ["h.ts"], cwd: "/src", output: "/out/kopf" });
    assert.deepEqual(plan.args, [
      "compile",
      "-A",
      "--no-code-cache",
      "--v8-flags=--max-semi-space-size=8,--maglev-as-top-tier,--expose-gc,--heap-growing-percent=40",
      "--include",
      "/src/h.ts",
      "--output",
      "/out/kopf",
      "/src/.kopf/build/main.ts",
    ]);
  },
);
