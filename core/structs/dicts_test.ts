import assert from "node:assert/strict";
import {
  cherrypick,
  deepCopy,
  deepCopyWithout,
  deepEqual,
  ensure,
  has,
  isMapping,
  nestedDeeperThan,
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

// ---------------------------------------------------------------------------------------------
// The fast paths (cached dotted paths, no copies when reading, deepCopyWithout) against the
// plain implementations they replaced, on varied generated values.

/** A small deterministic PRNG (mulberry32), so that failures reproduce. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ["a", "b", "spec", "metadata", "status", "__proto__", "x.y", "10", "", "kind"];

function randomJson(random: () => number, depth = 0): unknown {
  const pick = random();
  if (depth > 3 || pick < 0.35) {
    return [null, true, false, 0, -1.5, 1e21, "", "text", "ü\n"][Math.floor(random() * 9)];
  }
  if (pick < 0.55) {
    return Array.from({ length: Math.floor(random() * 4) }, () => randomJson(random, depth + 1));
  }
  const value: Record<string, unknown> = random() < 0.1 ? Object.create(null) : {};
  for (let i = Math.floor(random() * 5); i > 0; i--) {
    Object.defineProperty(value, KEYS[Math.floor(random() * KEYS.length)]!, {
      value: randomJson(random, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return value;
}

function oldParseField(field: string | readonly string[] | null | undefined): readonly string[] {
  if (field === null || field === undefined) return Object.freeze([]);
  if (typeof field === "string") return Object.freeze(field.split("."));
  return Object.freeze([...field]);
}

function oldResolve(obj: unknown, field: string | readonly string[] | null | undefined): unknown {
  let current: unknown = obj;
  for (const key of oldParseField(field)) {
    if (!isMapping(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

function oldDeepCopy<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item) => oldDeepCopy(item)) as T;
  if (isMapping(value)) {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      Object.defineProperty(copy, key, {
        value: oldDeepCopy(item),
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
    return copy as T;
  }
  return value;
}

/** Deep equality that also compares key order and prototypes (stricter than deepEqual). */
function sameShape(a: unknown, b: unknown): boolean {
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameShape(x, b[i]));
  }
  if (a !== null && typeof a === "object") {
    if (b === null || typeof b !== "object" || Array.isArray(b)) return false;
    const ak = Object.keys(a);
    const bk = Object.keys(b);
    return ak.length === bk.length && ak.every((k, i) => k === bk[i]) &&
      ak.every((k) =>
        sameShape((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])
      );
  }
  return Object.is(a, b);
}

Deno.test("parseField() and resolve() agree with the uncached implementation", () => {
  const random = prng(1);
  const fields = ["a", "a.b", "spec.a.b", "", "x.y", "metadata.__proto__", "10.a", "a..b"];
  for (let i = 0; i < 500; i++) {
    const value = randomJson(random);
    for (const field of fields) {
      assert.deepEqual(parseField(field), oldParseField(field));
      assert.ok(Object.isFrozen(parseField(field)));
      assert.equal(resolve(value, field), oldResolve(value, field));
      const path = field.split(".");
      assert.equal(resolve(value, path), oldResolve(value, path));
      assert.equal(resolve(value, Object.freeze(path)), oldResolve(value, path));
    }
    assert.equal(resolve(value, null), oldResolve(value, null));
  }
  // Repeated parses give equal frozen paths; a mutable array is copied, a frozen one kept.
  assert.equal(parseField("a.b"), parseField("a.b"));
  const mutable = ["a", "b"];
  assert.notEqual(parseField(mutable), mutable);
  mutable.push("c");
  assert.deepEqual(parseField(["a", "b"]), ["a", "b"]);
});

Deno.test("deepCopy() and deepCopyWithout() agree with the plain implementation", () => {
  const random = prng(2);
  const omit = ["metadata", "status", "kind"];
  for (let i = 0; i < 500; i++) {
    const value = randomJson(random);
    const copy = deepCopy(value);
    assert.ok(sameShape(copy, oldDeepCopy(value)));
    if (!isMapping(value)) continue;
    const expected = oldDeepCopy({ ...value }) as Record<string, unknown>;
    for (const key of omit) delete expected[key];
    const without = deepCopyWithout(value, omit);
    assert.ok(sameShape(without, expected), JSON.stringify([value, without, expected]));
    assert.equal(Object.getPrototypeOf(without), Object.prototype);
  }
});

Deno.test("deepCopyWithout() shares nothing with the source and keeps __proto__ as a key", () => {
  const source = JSON.parse('{"metadata":{"x":1},"spec":{"a":[1,{"b":2}]},"__proto__":{"p":1}}');
  const copy = deepCopyWithout(source, ["metadata"]);
  assert.deepEqual(Object.keys(copy), ["spec", "__proto__"]);
  assert.equal(Object.getPrototypeOf(copy), Object.prototype);
  assert.notEqual(copy.spec, source.spec);
  ((copy.spec as Record<string, unknown[]>).a![1] as Record<string, number>).b = 3;
  assert.equal(source.spec.a[1].b, 2);
});

Deno.test("nestedDeeperThan() counts levels of objects and arrays, at any depth, without recursion", () => {
  assert.equal(nestedDeeperThan(1, 0), false);
  assert.equal(nestedDeeperThan({}, 0), true);
  assert.equal(nestedDeeperThan({}, 1), false);
  assert.equal(nestedDeeperThan({ a: { b: [1] } }, 2), true);
  assert.equal(nestedDeeperThan({ a: { b: [1] } }, 3), false);
  assert.equal(nestedDeeperThan({ a: 1, b: [[[]]] }, 3), true, "arrays count");
  // Far deeper than any recursive walk could go (the API server stops at 10,000).
  const depth = 200_000;
  const deep = JSON.parse("[".repeat(depth) + "]".repeat(depth));
  assert.equal(nestedDeeperThan(deep, depth - 1), true);
  assert.equal(nestedDeeperThan(deep, depth), false);
  // Inherited properties are not the value's own fields.
  assert.equal(nestedDeeperThan(Object.create({ inherited: {} }), 1), false);
});

Deno.test("nestedDeeperThan() answers alike on both sides of its recursion budget, in wide values too", () => {
  const chain = (depth: number, width: number): unknown => {
    let value: unknown = Array.from({ length: width }, (_, i) => ({ i }));
    for (let level = 2; level < depth; level++) {
      value = level % 2 ? [value, 1, { x: 1 }] : { a: value, b: [1], c: null };
    }
    return value;
  };
  for (const depth of [2, 3, 255, 256, 257, 258, 511, 512, 513, 2000]) {
    const value = chain(depth, 3);
    for (const limit of [depth - 2, depth - 1, depth, depth + 1]) {
      assert.equal(nestedDeeperThan(value, limit), depth > limit, `depth ${depth}, limit ${limit}`);
    }
  }
});
