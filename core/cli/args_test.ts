// Unit tests of the wording of command-line parsing errors, with the errors parseArgs really
// throws.
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { argsErrorMessage } from "./args.ts";
import { main } from "./main.ts";

function thrown(args: string[], allowPositionals = true): unknown {
  try {
    parseArgs({ args, allowPositionals, options: { namespace: { type: "string" } } });
  } catch (error) {
    return error;
  }
  assert.fail(`parseArgs accepted ${args}`);
}

function balanced(message: string): boolean {
  return (message.match(/'/g) ?? []).length % 2 === 0 &&
    (message.match(/"/g) ?? []).length % 2 === 0;
}

Deno.test("argsErrorMessage() words an unknown option with balanced quotes", () => {
  for (const option of ["--bogus", "-x"]) {
    const message = argsErrorMessage(thrown([option]));
    assert.equal(
      message,
      `Unknown option '${option}'; a file name that starts with '-' goes after '--'`,
    );
    assert.ok(balanced(message), message);
  }
  assert.equal(
    argsErrorMessage(thrown(["--bogus"], false)).startsWith("Unknown option '--bogus'"),
    true,
  );
});

Deno.test("argsErrorMessage() keeps the first line of other errors", () => {
  assert.equal(
    argsErrorMessage(thrown(["--namespace"])),
    "Option '--namespace <value>' argument missing",
  );
  assert.equal(argsErrorMessage(new Error("one\ntwo")), "one");
  assert.equal(argsErrorMessage("plain."), "plain");
});

Deno.test("kopf run --bogus: one error line with balanced quotes and a pointer to --help", async () => {
  const lines: string[] = [];
  const code = await main(["run", "--bogus", "handlers.ts"], { write: (l) => lines.push(l) });
  assert.equal(code, 1);
  assert.deepEqual(lines, [
    "error: Unknown option '--bogus'; a file name that starts with '-' goes after '--' (see kopf run --help)",
  ]);
});
