// Unit tests of the tooling commands' shared command line (commandLine() in _io.ts): every
// command words a bad option the same way, points to its own --help, and answers --help.
import assert from "node:assert/strict";
import { tooling } from "./commands.ts";

const COMMANDS: ReadonlyArray<readonly ["generate" | "init" | "build", string[], string]> = [
  ["init", [], "kopf init"],
  ["build", [], "kopf build"],
  ["generate", ["types"], "kopf generate"],
  ["generate", ["builtins"], "kopf generate"],
  ["generate", ["rbac"], "kopf generate rbac"],
];

async function run(command: "generate" | "init" | "build", args: string[]) {
  const printed: string[] = [];
  const output: string[] = [];
  const code = await tooling(command, args, {
    print: (line) => printed.push(line),
    output: (text) => output.push(text),
  });
  return { code, printed, output: output.join("") };
}

Deno.test("kopf init|build|generate: an unknown option is one error line with balanced quotes and the command's --help", async () => {
  for (const [command, words, name] of COMMANDS) {
    const { code, printed, output } = await run(command, [...words, "--bogus"]);
    assert.equal(code, 1, name);
    assert.deepEqual(printed, [
      `error: Unknown option '--bogus'; a file name that starts with '-' goes after '--' (see ${name} --help)`,
    ]);
    assert.equal(output, "");
  }
});

Deno.test("kopf init|build|generate: --help and -h print the usage and exit 0", async () => {
  for (const [command, words, name] of COMMANDS) {
    for (const help of ["--help", "-h"]) {
      const { code, printed, output } = await run(command, [...words, help]);
      assert.equal(code, 0, `${name} ${help}: ${printed.join("\n")}`);
      assert.deepEqual(printed, []);
      assert.match(output, new RegExp(`^Usage: ${name} `), `${name} ${help}`);
    }
  }
});

Deno.test("kopf generate builtins: a positional is one error line (it takes none)", async () => {
  const { code, printed } = await run("generate", ["builtins", "extra"]);
  assert.equal(code, 1);
  assert.equal(printed.length, 1);
  assert.match(printed[0]!, /^error: Unexpected argument 'extra'.*\(see kopf generate --help\)$/);
});
