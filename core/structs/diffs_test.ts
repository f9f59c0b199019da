import assert from "node:assert/strict";
import { type Diff, diff, diffFromJson, diffToJson, EMPTY_DIFF, reduce } from "./diffs.ts";
// Produced by real Python Kopf (kopf==1.45.2) with tests/compat/kopf_formats.py; see there.
import KOPF from "../../tests/compat/kopf_formats.json" with { type: "json" };

/** Kopf yields items in set order, so compare both sides sorted by their canonical JSON. */
function sorted(d: Diff | unknown[][]): unknown[][] {
  const items = diffToJson(diffFromJson(d));
  return items.sort((a, b) => canonical(a).localeCompare(canonical(b)));
}

function canonical(value: unknown): string {
  return JSON.stringify(
    value,
    (_, v) =>
      v && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
        : v,
  );
}

Deno.test("diff() reports nothing for equal values, including both absent", () => {
  assert.deepEqual(diff(null, null), []);
  assert.deepEqual(diff(undefined, null), []);
  assert.deepEqual(diff({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), []);
  assert.equal(EMPTY_DIFF.length, 0);
});

Deno.test("diff() adds and removes whole subtrees against absence", () => {
  assert.deepEqual(diff(null, { spec: { a: 1 } }), [["add", [], null, { spec: { a: 1 } }]]);
  assert.deepEqual(diff({ spec: { a: 1 } }, undefined), [["remove", [], { spec: { a: 1 } }, null]]);
  assert.deepEqual(diff({}, { a: { b: 1 } }), [["add", ["a"], null, { b: 1 }]]);
});

Deno.test("diff() treats null-valued keys as absent", () => {
  assert.deepEqual(diff({ a: null }, {}), []);
  assert.deepEqual(diff({ a: null }, { a: 1 }), [["add", ["a"], null, 1]]);
  assert.deepEqual(diff({ a: {} }, { a: null }), [["remove", ["a"], {}, null]]);
});

Deno.test("diff() compares lists and type changes as whole values", () => {
  assert.deepEqual(diff({ a: [1, 2] }, { a: [1, 2, 3] }), [["change", ["a"], [1, 2], [1, 2, 3]]]);
  assert.deepEqual(diff({ a: { x: 1 } }, { a: "s" }), [["change", ["a"], { x: 1 }, "s"]]);
  assert.deepEqual(diff(1, 2), [["change", [], 1, 2]]);
});

Deno.test("diff() orders additions, removals, then common keys", () => {
  const d = diff({ keep: 1, gone: 1, same: 0 }, { same: 0, keep: 2, new: 1 });
  assert.deepEqual(d, [
    ["add", ["new"], null, 1],
    ["remove", ["gone"], 1, null],
    ["change", ["keep"], 1, 2],
  ]);
});

Deno.test("diff() prefixes paths and honours the scope", () => {
  assert.deepEqual(diff(1, 2, { path: ["spec", "x"] }), [["change", ["spec", "x"], 1, 2]]);
  const a = { a: 1, b: { c: 1 } };
  const b = { b: { c: 2, d: 3 }, e: 4 };
  assert.deepEqual(sorted(diff(a, b, { scope: "left" })), sorted(KOPF.diffs.scope_left));
  assert.deepEqual(sorted(diff(a, b, { scope: "right" })), sorted(KOPF.diffs.scope_right));
});

Deno.test("diff() matches Python Kopf on all recorded cases", () => {
  for (const { a, b, diff: expected } of KOPF.diffs.diff) {
    assert.deepEqual(sorted(diff(a, b)), sorted(expected), JSON.stringify([a, b]));
  }
});

Deno.test("reduce() matches Python Kopf on all recorded cases", () => {
  for (const { a, b, path, diff: expected } of KOPF.diffs.reduce) {
    assert.deepEqual(sorted(reduce(diff(a, b), path)), sorted(expected), JSON.stringify(path));
  }
});

Deno.test("reduce() re-roots inner items and re-diffs the field inside added parents", () => {
  const d = diff({ spec: { s: { x: 1 }, t: 1 } }, { spec: { s: { x: 2 }, t: 2 } });
  assert.deepEqual(reduce(d, "spec.s"), [["change", ["x"], 1, 2]]);
  assert.deepEqual(reduce(diff(null, { spec: { s: { x: 1 } } }), "spec.s.x"), [[
    "add",
    [],
    null,
    1,
  ]]);
  assert.deepEqual(reduce(d, []), d);
  assert.deepEqual(reduce(d, "status"), []);
});

Deno.test("diffToJson() and diffFromJson() round-trip through JSON text", () => {
  const d = diff({ a: { b: 1 }, c: [1] }, { a: { b: 2 }, d: null, e: "x" });
  const text = JSON.stringify(diffToJson(d));
  assert.equal(text, '[["add",["e"],null,"x"],["remove",["c"],[1],null],["change",["a","b"],1,2]]');
  assert.deepEqual(diffFromJson(JSON.parse(text)), d);
});

Deno.test("diffFromJson() rejects malformed diffs", () => {
  assert.throws(() => diffFromJson({}), TypeError);
  assert.throws(() => diffFromJson([["add", ["a"], null]]), TypeError);
  assert.throws(() => diffFromJson([["replace", ["a"], null, 1]]), TypeError);
  assert.throws(() => diffFromJson([["add", "a", null, 1]]), TypeError);
});
