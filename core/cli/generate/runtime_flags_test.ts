/**
 * The flags an operator runs with are the ones a user gets: `tools/kopf run` (the `kopf` command
 * of a checkout) starts the operator's process with RUNTIME_DENO_FLAGS and RUNTIME_V8_FLAGS, as
 * `kopf build` and `kopf build --image` bake them in (image_test.ts, tests/tooling_build_test.ts).
 * No cluster: the handler module reads its own process's command line and exits before the
 * operator connects anywhere.
 */
import assert from "node:assert/strict";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "./runtime_flags.ts";

const ROOT = new URL("../../..", import.meta.url).pathname.replace(/\/$/, "");

async function commandLineOf(args: string[]): Promise<string[]> {
  const dir = await Deno.makeTempDir({ prefix: "kopf-runtime-flags-" });
  try {
    const module = `${dir}/cmdline.ts`;
    await Deno.writeTextFile(
      module,
      'const line = Deno.readTextFileSync("/proc/self/cmdline").split("\\0").filter(Boolean);\n' +
        "console.log(JSON.stringify(line));\nDeno.exit(0);\n",
    );
    const out = await new Deno.Command(`${ROOT}/tools/kopf`, {
      args: [...args, module, "-n", "default", "--standalone"],
      cwd: ROOT,
      env: { KUBECONFIG: `${dir}/none` },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return JSON.parse(text.split("\n").at(-1)!);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "tools/kopf run starts the operator with RUNTIME_DENO_FLAGS and RUNTIME_V8_FLAGS",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    const line = await commandLineOf(["run"]);
    const run = line.indexOf("run");
    const script = line.findIndex((arg) => arg.endsWith("/cli.ts"));
    assert.ok(run > 0 && script > run, line.join(" "));
    const flags = line.slice(run + 1, script);
    for (const flag of [...RUNTIME_DENO_FLAGS, `--v8-flags=${RUNTIME_V8_FLAGS.join(",")}`]) {
      assert.ok(flags.includes(flag), `${flag} in ${line.join(" ")}`);
    }
  },
});

Deno.test("the runtime flags keep Maglev as V8's top tier (TurboFan off), not the interpreter-only mode", () => {
  // docs/performance.md, round 8: without any optimising compiler the peak is lower but steady
  // CPU is 37–46% higher; that mode is an option, not the default.
  assert.ok(RUNTIME_V8_FLAGS.includes("--maglev-as-top-tier"));
  assert.ok(!RUNTIME_V8_FLAGS.includes("--no-maglev"));
});
