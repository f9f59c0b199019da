/**
 * Compile-time tests: `deno check` on a fixture that must compile, or on one that must fail on
 * exactly its lines marked `// expected error` (and on no other).
 */

import assert from "node:assert/strict";

/** Options of {@link denoCheck}. */
export interface CheckOptions {
  /** The configuration to check with (for fixtures outside the repository, e.g. generated). */
  readonly config?: string;
}

/**
 * Checks a fixture with `deno check`.
 * @param url The fixture.
 * @param options The configuration to use.
 * @returns Whether it compiled, and the compiler's output.
 */
export async function denoCheck(
  url: URL,
  options: CheckOptions = {},
): Promise<{ ok: boolean; output: string }> {
  const config = options.config === undefined ? [] : ["--config", options.config];
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--quiet", ...config, decodeURIComponent(url.pathname)],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { ok: result.success, output: decode(result.stdout) + decode(result.stderr) };
}

/**
 * Asserts that a fixture fails to compile on exactly its lines marked `// expected error`.
 * @param url The fixture.
 * @param minimum How many marked lines the fixture must have at least.
 * @param options The configuration to use.
 */
export async function assertCompileErrors(
  url: URL,
  minimum: number,
  options: CheckOptions = {},
): Promise<void> {
  const { ok, output } = await denoCheck(url, options);
  assert.ok(!ok, "the fixture must not compile");
  const name = url.pathname.split("/").pop()!.replaceAll(".", "\\.");
  const expected = (await Deno.readTextFile(url)).split("\n")
    .flatMap((line, i) => line.includes("// expected error") ? [i + 1] : []);
  const reported = new Set(
    [...output.matchAll(new RegExp(`${name}:(\\d+):\\d+`, "g"))].map((m) => Number(m[1])),
  );
  assert.ok(expected.length >= minimum, "the fixture marks its errors");
  assert.deepEqual(expected.filter((line) => !reported.has(line)), [], output);
  assert.deepEqual([...reported].filter((line) => !expected.includes(line)), [], output);
}
