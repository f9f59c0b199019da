/**
 * docs/parity.md's proofs point at things that exist: every file its "proof" column names is in
 * the repository, and every test it quotes after a test file (`tests/x_test.ts: "name", …`) is
 * a test of that file. A renamed, moved or deleted test makes this fail at the row that cites
 * it, so the parity table cannot drift from the suite.
 *
 * Quoted names are matched against the file's text with string concatenations joined; `…` in a
 * quoted name stands for an elided part, and a test named by a template literal matches with
 * its `${…}` parts as wildcards (when at least half the name is the literal's own text).
 */

import assert from "node:assert/strict";
import { parityProofs, testNameFound } from "./_parity_refs.ts";

const REPO = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(`${REPO}/${path}`);
    return true;
  } catch {
    return false;
  }
}

Deno.test("parity.md: every file and test named as a proof exists", async () => {
  const proofs = parityProofs(await Deno.readTextFile(`${REPO}/docs/parity.md`));
  assert.ok(proofs.length > 500, `only ${proofs.length} proofs read: has the table changed?`);
  const sources = new Map<string, string | undefined>();
  const problems: string[] = [];
  let names = 0;
  for (const proof of proofs) {
    if (!sources.has(proof.path)) {
      sources.set(
        proof.path,
        await exists(proof.path) ? await Deno.readTextFile(`${REPO}/${proof.path}`) : undefined,
      );
    }
    const source = sources.get(proof.path);
    if (source === undefined) {
      problems.push(`${proof.id} (line ${proof.line}): no file ${proof.path}`);
      continue;
    }
    for (const name of proof.tests) {
      names++;
      if (!testNameFound(source, name)) {
        problems.push(`${proof.id} (line ${proof.line}): ${proof.path} has no test "${name}"`);
      }
    }
  }
  assert.ok(names > 500, `only ${names} quoted test names read: has the format changed?`);
  assert.deepEqual(problems, []);
});

Deno.test("parity.md proofs: the reader finds paths and quoted names, and tells a missing test", () => {
  const table = [
    "| ID | what | status | proof |",
    "|---|---|---|---|",
    '| A-01 | x | done | tests/a_test.ts: "one", "two (A-01)"; code: core/x.ts f() |',
    '| A-02 | y | partial — z | tests/b_test.ts: "three … end"; core/y_test.ts |',
    "| A-03 | w | won't | — |",
  ].join("\n");
  const proofs = parityProofs(table);
  assert.deepEqual(
    proofs.map((p) => [p.id, p.line, p.path, p.tests]),
    [
      ["A-01", 3, "tests/a_test.ts", ["one", "two (A-01)"]],
      ["A-01", 3, "core/x.ts", []],
      ["A-02", 4, "tests/b_test.ts", ["three … end"]],
      ["A-02", 4, "core/y_test.ts", []],
    ],
  );

  const source = [
    'Deno.test("one", () => {});',
    "Deno.test(",
    '  "two " +',
    '    "(A-01)",',
    "  () => {},",
    ");",
    "Deno.test(`exec plugin (${version}): renewed`, () => {});",
    'Deno.test("three, then the middle, then the end", () => {});',
    "for (const label of labels) Deno.test(`${label}`, () => {});",
  ].join("\n");
  assert.ok(testNameFound(source, "one"));
  assert.ok(testNameFound(source, "two (A-01)"), "a concatenated name");
  assert.ok(testNameFound(source, "exec plugin (v1): renewed"), "a template literal");
  assert.ok(testNameFound(source, "three … end"), "an elided name");
  assert.ok(!testNameFound(source, "four"), "a literal of substitutions only matches nothing");
  assert.ok(!testNameFound(source, "two (A-02)"));
  assert.ok(!testNameFound(source, "exec plugin (v1): rejected"));
});
