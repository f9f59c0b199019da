import assert from "node:assert/strict";
import {
  cherrypick,
  deepCopy,
  deepEqual,
  ensure,
  has,
  isMapping,
  parseField,
  remove,
  resolve,
} from "./dicts.ts";

Deno.test("parseField() splits dotted strings, copies arrays, maps null to the root", () => {
  assert.deepEqual(parseField("spec.field"), ["spec", "field"]);
  assert.deepEqual(parseField(["metadata", "annotations", "example.com/x"]), [
    "metadata",
    "annotations",
    "example.com/x",
  ]);
  assert.deepEqual(parseField(null), []);
  assert.deepEqual(parseField(undefined), []);
  assert.ok(Object.isFrozen(parseField("a")));
});

Deno.test("resolve() reads nested fields and treats non-objects on the way as absent", () => {
  const body = { spec: { a: { b: 1 }, n: null, s: "text", l: [1] } };
  assert.equal(resolve(body, "spec.a.b"), 1);
  assert.deepEqual(resolve(body, "spec.a"), { b: 1 });
  assert.equal(resolve(body, "spec.n"), null);
  assert.equal(resolve(body, "spec.absent"), undefined);
  assert.equal(resolve(body, "spec.s.length"), undefined);
  assert.equal(resolve(body, "spec.l.0"), undefined);
  assert.equal(resolve(body, "spec.n.x"), undefined);
  assert.equal(resolve(null, "a"), undefined);
  assert.equal(resolve(body, null), body);
});

Deno.test("resolve() sees own properties only", () => {
  assert.equal(resolve({}, "constructor"), undefined);
  assert.equal(resolve({ a: {} }, "a.toString"), undefined);
  assert.equal(resolve({}, "__proto__"), undefined);
  assert.equal(resolve(JSON.parse('{"__proto__": 1}'), "__proto__"), 1);
});

Deno.test("has() tells present-with-null from absent", () => {
  assert.equal(has({ a: null }, "a"), true);
  assert.equal(has({ a: {} }, "a.b"), false);
  assert.equal(has({}, null), true);
});

Deno.test("ensure() creates missing parents and overwrites leaves", () => {
  const obj: Record<string, unknown> = { spec: { keep: 1 } };
  ensure(obj, "spec.a.b", 2);
  ensure(obj, ["metadata", "annotations", "example.com/x"], "y");
  ensure(obj, "spec.keep", null);
  assert.deepEqual(obj, {
    spec: { keep: null, a: { b: 2 } },
    metadata: { annotations: { "example.com/x": "y" } },
  });
});

Deno.test("ensure() refuses the root and non-object parents", () => {
  assert.throws(() => ensure({}, null, 1), RangeError);
  assert.throws(() => ensure({ a: "x" }, "a.b", 1), TypeError);
  assert.throws(() => ensure({ a: null }, "a.b", 1), TypeError);
});

Deno.test("ensure() stores __proto__ as an ordinary key", () => {
  const obj: Record<string, unknown> = {};
  ensure(obj, "__proto__.x", 1);
  assert.equal(Object.getPrototypeOf(obj), Object.prototype);
  assert.deepEqual(Object.keys(obj), ["__proto__"]);
  assert.equal(resolve(obj, "__proto__.x"), 1);
});

Deno.test("remove() deletes the field and the parents it leaves empty", () => {
  const obj: Record<string, unknown> = { a: { b: { c: 1 } }, x: { y: 1, z: 2 }, e: {} };
  remove(obj, "a.b.c");
  remove(obj, "x.y");
  assert.deepEqual(obj, { x: { z: 2 }, e: {} });
});

Deno.test("remove() ignores absent fields and non-object parents", () => {
  const obj: Record<string, unknown> = { a: "text", b: { c: null } };
  remove(obj, "absent.field");
  remove(obj, "a.b");
  remove(obj, "b.c.d");
  assert.deepEqual(obj, { a: "text", b: { c: null } });
  assert.throws(() => remove(obj, []), RangeError);
});

Deno.test("cherrypick() copies present fields deeply and skips absent ones", () => {
  const src = { metadata: { labels: { a: "1" } }, status: { x: { y: 1 } } };
  const dst: Record<string, unknown> = { spec: {} };
  cherrypick(src, dst, ["metadata.labels", "metadata.annotations", "status.x", "status.z.w"]);
  assert.deepEqual(dst, { spec: {}, metadata: { labels: { a: "1" } }, status: { x: { y: 1 } } });
  (dst.status as { x: { y: number } }).x.y = 2;
  assert.equal(src.status.x.y, 1);
  cherrypick(src, dst, null);
});

Deno.test("deepCopy() copies objects and arrays and keeps key order", () => {
  const src = { b: [1, { c: 2 }], a: null };
  const copy = deepCopy(src);
  assert.deepEqual(copy, src);
  assert.deepEqual(Object.keys(copy), ["b", "a"]);
  assert.notEqual(copy.b, src.b);
  assert.notEqual(copy.b[1], src.b[1]);
});

Deno.test("deepEqual() compares as JSON", () => {
  assert.ok(deepEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }));
  assert.ok(deepEqual({ a: undefined }, {}));
  assert.ok(!deepEqual({ a: null }, {}));
  assert.ok(!deepEqual([1, 2], [2, 1]));
  assert.ok(!deepEqual([1], { 0: 1 }));
  assert.ok(!deepEqual(1, "1"));
  assert.ok(!deepEqual(true, 1));
  assert.ok(deepEqual(NaN, NaN));
});

Deno.test("isMapping() accepts plain objects only", () => {
  assert.ok(isMapping({}));
  assert.ok(isMapping(Object.create(null)));
  assert.ok(!isMapping([]));
  assert.ok(!isMapping(null));
  assert.ok(!isMapping(new Date()));
  assert.ok(!isMapping("x"));
});
