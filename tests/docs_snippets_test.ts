/**
 * Every TypeScript block of README.md and docs/*.md compiles, unless it is marked as a fragment
 * (```` ```ts fragment ````) or is a whole project file (`file=PATH`, which
 * tests/walkthrough_test.ts checks in its project). Each block becomes a module of its own in a
 * temporary directory, `jsr:@kopf/ts…` and `@kopf/ts…` mapped to this checkout's modules (the
 * exports of deno.json), and one `deno check` runs over all of them; an error is reported at its
 * Markdown file and line. The convention is in docs/contributing.md.
 */

import assert from "node:assert/strict";
import { codeBlocks, TS_LANGS } from "./_markdown.ts";
import { tempDir } from "./_support.ts";

const REPO = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");

async function docs(): Promise<string[]> {
  const files = ["README.md"];
  for await (const entry of Deno.readDir(`${REPO}/docs`)) {
    if (entry.isFile && entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  return files.sort();
}

Deno.test("docs: every TypeScript snippet compiles or is marked as a fragment", async () => {
  await using dir = await tempDir("kopf-snippets-");
  const config = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`));
  const imports: Record<string, string> = {};
  for (const [key, value] of Object.entries(config.imports as Record<string, string>)) {
    imports[key] = value;
  }
  for (const [sub, target] of Object.entries(config.exports as Record<string, string>)) {
    imports[sub === "." ? "@kopf/ts" : `@kopf/ts/${sub.slice(2)}`] = `${REPO}/${target.slice(2)}`;
  }
  await Deno.writeTextFile(
    `${dir.path}/deno.json`,
    JSON.stringify({ imports, compilerOptions: config.compilerOptions, lock: false }),
  );

  /** Temporary file name → the block's Markdown file and the line of its first code line. */
  const origins = new Map<string, { path: string; line: number }>();
  for (const path of await docs()) {
    const blocks = codeBlocks(path, await Deno.readTextFile(`${REPO}/${path}`));
    for (const block of blocks) {
      if (!TS_LANGS.has(block.lang) || block.flags.includes("fragment") || block.attrs.file) {
        continue;
      }
      const name = `${path.replace(/[/.]/g, "_")}_L${block.line}.ts`;
      origins.set(name, { path, line: block.line + 1 });
      // `jsr:@kopf/ts…` as published; `../mod.ts` & co. relative to docs/ (the checkout).
      const code = block.code.replaceAll(`"jsr:@kopf/ts`, `"@kopf/ts`)
        .replaceAll(`from "../`, `from "${REPO}/`);
      // A module of its own (no clashes between blocks); nothing changes the block's lines.
      await Deno.writeTextFile(`${dir.path}/${name}`, `${code}export {};\n`);
    }
  }
  assert.ok(origins.size > 10, `only ${origins.size} snippets found`);

  const out = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--config", `${dir.path}/deno.json`, ...[...origins.keys()]],
    cwd: dir.path,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.success) return;
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  // Each error as "README.md:12:5: TS2304 Cannot find name 'client'." with its Markdown line.
  const errors: string[] = [];
  let message = "";
  for (const line of text.split("\n")) {
    const code = /^(TS\d+) \[ERROR\]: (.*)$/.exec(line);
    if (code) message = `${code[1]} ${code[2]}`;
    const at = /at file:\/\/\S*\/([^/\s]+\.ts):(\d+):(\d+)/.exec(line);
    const origin = at && origins.get(at[1]!);
    if (origin && message) {
      errors.push(`${origin.path}:${origin.line + Number(at[2]) - 1}:${at[3]}: ${message}`);
      message = "";
    }
  }
  assert.fail(
    `${errors.length || "some"} TypeScript snippet error(s); fix the snippet or mark a real ` +
      "fragment with ```ts fragment (docs/contributing.md):\n" +
      (errors.length ? errors.join("\n") : text),
  );
});
