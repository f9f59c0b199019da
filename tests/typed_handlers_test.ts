/**
 * Typed handlers: one type name (`on.create<KopfExample>`) or a typed resource constant
 * (`on.create(KopfExamples, …)`) types spec, status, body, patch, old/new/diff for every handler
 * kind. Proved with `deno check` on two fixtures: one must compile, the other must fail on
 * exactly its lines marked `expected error`.
 */

import assert from "node:assert/strict";

const here = (path: string) => decodeURIComponent(new URL(path, import.meta.url).pathname);

async function check(file: string): Promise<{ ok: boolean; output: string }> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--quiet", here(file)],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { ok: result.success, output: decode(result.stdout) + decode(result.stderr) };
}

Deno.test("typed handlers: correct uses and old untyped spellings compile (X-TOOL-02)", async () => {
  const { ok, output } = await check("./types/typed_ok.ts");
  assert.ok(ok, output);
});

Deno.test("typed handlers: each misuse of a typed field is a compile error (X-TOOL-02)", async () => {
  const file = "./types/typed_wrong.ts";
  const { ok, output } = await check(file);
  assert.ok(!ok, "the fixture must not compile");
  const expected = (await Deno.readTextFile(here(file))).split("\n")
    .flatMap((line, i) => line.includes("// expected error") ? [i + 1] : []);
  const reported = new Set(
    [...output.matchAll(/typed_wrong\.ts:(\d+):\d+/g)].map((match) => Number(match[1])),
  );
  assert.ok(expected.length >= 10, "the fixture marks its errors");
  assert.deepEqual(expected.filter((line) => !reported.has(line)), [], output);
  assert.deepEqual([...reported].filter((line) => !expected.includes(line)), [], output);
});
