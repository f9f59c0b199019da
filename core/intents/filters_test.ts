import assert from "node:assert/strict";
import {
  ABSENT,
  all_,
  any_,
  matchField,
  matchMeta,
  matchValue,
  type MetaFilter,
  none_,
  not_,
  PRESENT,
  type ValueCallback,
} from "./filters.ts";

const CTX = { reason: "create", memo: { x: 1 } };

// --- matchValue ------------------------------------------------------------------------------

Deno.test("matchValue() compares literals by value and fails for absent values (FLT-04, FLT-07)", () => {
  assert.equal(matchValue("a", "a", CTX), true);
  assert.equal(matchValue("a", "b", CTX), false);
  assert.equal(matchValue("a", undefined, CTX), false);
  assert.equal(matchValue(1, 1, CTX), true);
  assert.equal(matchValue(1, "1", CTX), false);
  assert.equal(matchValue(true, true, CTX), true);
  assert.equal(matchValue(false, undefined, CTX), false);
  assert.equal(matchValue({ a: [1, 2] }, { a: [1, 2] }, CTX), true);
  assert.equal(matchValue({ a: [1, 2] }, { a: [2, 1] }, CTX), false);
});

Deno.test({
  name: "matchValue() compares object literals regardless of key order (FLT-07)",
  fn() {
    assert.equal(matchValue({ a: 1, b: { c: 2, d: 3 } }, { b: { d: 3, c: 2 }, a: 1 }, CTX), true);
  },
});

Deno.test("matchValue() with PRESENT/ABSENT checks presence only (FLT-05, FLT-07)", () => {
  assert.equal(matchValue(PRESENT, "x", CTX), true);
  assert.equal(matchValue(PRESENT, 0, CTX), true);
  assert.equal(matchValue(PRESENT, false, CTX), true);
  assert.equal(matchValue(PRESENT, undefined, CTX), false);
  assert.equal(matchValue(PRESENT, null, CTX), false);
  assert.equal(matchValue(ABSENT, undefined, CTX), true);
  assert.equal(matchValue(ABSENT, null, CTX), true);
  assert.equal(matchValue(ABSENT, "x", CTX), false);
});

Deno.test("matchValue() treats an empty string as present (FLT-06)", () => {
  assert.equal(matchValue(PRESENT, "", CTX), true);
  assert.equal(matchValue(ABSENT, "", CTX), false);
  assert.equal(matchValue("", "", CTX), true);
  assert.equal(matchValue("", undefined, CTX), false);
});

Deno.test("matchValue() passes the value and the context to callbacks (FLT-14)", () => {
  const calls: unknown[][] = [];
  const cb = (value: unknown, context: unknown) => {
    calls.push([value, context]);
    return value === "yes";
  };
  assert.equal(matchValue(cb as ValueCallback, "yes", CTX), true);
  assert.equal(matchValue(cb as ValueCallback, "no", CTX), false);
  assert.equal(matchValue(cb as ValueCallback, null, CTX), false);
  assert.deepEqual(calls, [["yes", CTX], ["no", CTX], [undefined, CTX]]);
});

Deno.test("matchValue() coerces callback results to booleans (FLT-14)", () => {
  const truthy = (() => "non-empty") as unknown as ValueCallback;
  const falsy = (() => 0) as unknown as ValueCallback;
  assert.equal(matchValue(truthy, undefined, CTX), true);
  assert.equal(matchValue(falsy, "x", CTX), false);
});

// --- matchMeta -------------------------------------------------------------------------------

Deno.test("matchMeta() AND-s all key filters (FLT-01, FLT-04)", () => {
  const labels = { app: "web", tier: "front" };
  assert.equal(matchMeta({ app: "web", tier: "front" }, labels, CTX), true);
  assert.equal(matchMeta({ app: "web", tier: "back" }, labels, CTX), false);
  assert.equal(matchMeta({ app: "web", other: PRESENT }, labels, CTX), false);
});

Deno.test("matchMeta() without filters passes, even without labels (FLT-01)", () => {
  assert.equal(matchMeta(undefined, undefined, CTX), true);
  assert.equal(matchMeta({}, undefined, CTX), true);
});

Deno.test("matchMeta() supports PRESENT and ABSENT keys, also without any mapping (FLT-05)", () => {
  assert.equal(matchMeta({ app: PRESENT }, { app: "x" }, CTX), true);
  assert.equal(matchMeta({ app: PRESENT }, {}, CTX), false);
  assert.equal(matchMeta({ app: PRESENT }, undefined, CTX), false);
  assert.equal(matchMeta({ app: ABSENT }, undefined, CTX), true);
  assert.equal(matchMeta({ app: ABSENT }, { app: "x" }, CTX), false);
});

Deno.test("matchMeta() counts empty-string values as present (FLT-06)", () => {
  assert.equal(matchMeta({ app: PRESENT }, { app: "" }, CTX), true);
  assert.equal(matchMeta({ app: ABSENT }, { app: "" }, CTX), false);
  assert.equal(matchMeta({ app: "" }, { app: "" }, CTX), true);
});

Deno.test("matchMeta() does not see inherited properties as keys (FLT-05)", () => {
  const inherited = (key: string, filter: symbol) => ({ [key]: filter }) as MetaFilter;
  assert.equal(matchMeta(inherited("toString", ABSENT), {}, CTX), true);
  assert.equal(matchMeta(inherited("constructor", PRESENT), {}, CTX), false);
});

Deno.test("matchMeta() calls per-value callbacks with the value (or undefined) and context (FLT-14)", () => {
  const seen: unknown[] = [];
  const cb = ((value: unknown, context: unknown) => {
    seen.push(value, context);
    return value === undefined;
  }) as ValueCallback;
  assert.equal(matchMeta({ missing: cb }, { app: "x" }, CTX), true);
  assert.equal(matchMeta({ app: cb }, { app: "x" }, CTX), false);
  assert.deepEqual(seen, [undefined, CTX, "x", CTX]);
});

// --- matchField ------------------------------------------------------------------------------

Deno.test("matchField() without a filter means PRESENT (FLT-08)", () => {
  const body = { spec: { field: "v", empty: "", zero: 0, nil: null } };
  assert.equal(matchField(["spec", "field"], undefined, body, CTX), true);
  assert.equal(matchField(["spec", "empty"], undefined, body, CTX), true);
  assert.equal(matchField(["spec", "zero"], undefined, body, CTX), true);
  assert.equal(matchField(["spec", "nil"], undefined, body, CTX), false);
  assert.equal(matchField(["spec", "missing"], undefined, body, CTX), false);
  assert.equal(matchField(["spec", "field", "deeper"], undefined, body, CTX), false);
});

Deno.test("matchField() compares literals and presence markers at the path (FLT-07)", () => {
  const body = { spec: { field: "value", nested: { n: 3 } } };
  assert.equal(matchField(["spec", "field"], "value", body, CTX), true);
  assert.equal(matchField(["spec", "field"], "other", body, CTX), false);
  assert.equal(matchField(["spec", "nested"], { n: 3 }, body, CTX), true);
  assert.equal(matchField(["spec", "nested", "n"], 3, body, CTX), true);
  assert.equal(matchField(["spec", "absent"], ABSENT, body, CTX), true);
  assert.equal(matchField(["spec", "field"], ABSENT, body, CTX), false);
});

Deno.test("matchField() passes the field value and context to callbacks (FLT-14)", () => {
  const seen: unknown[] = [];
  const cb = ((value: unknown, context: unknown) => {
    seen.push(value, context);
    return typeof value === "number" && value > 2;
  }) as ValueCallback;
  assert.equal(matchField(["spec", "size"], cb, { spec: { size: 3 } }, CTX), true);
  assert.equal(matchField(["spec", "size"], cb, { spec: { size: 1 } }, CTX), false);
  assert.equal(matchField(["spec", "size"], cb, {}, CTX), false);
  assert.deepEqual(seen, [3, CTX, 1, CTX, undefined, CTX]);
});

// --- combinators -----------------------------------------------------------------------------

const isBig = (value: unknown) => typeof value === "number" && value > 10;
const isEven = (value: unknown) => typeof value === "number" && value % 2 === 0;

Deno.test("not_() inverts a callback and forwards all arguments (FLT-16)", () => {
  const seen: unknown[][] = [];
  const spy = (...args: unknown[]) => {
    seen.push(args);
    return args[0] === 1;
  };
  const inverted = not_(spy);
  assert.equal(inverted(1, CTX), false);
  assert.equal(inverted(2, CTX), true);
  assert.deepEqual(seen, [[1, CTX], [2, CTX]]);
});

Deno.test("all_() passes only when every callback passes (FLT-16)", () => {
  const both = all_([isBig, isEven]);
  assert.equal(both(12), true);
  assert.equal(both(11), false);
  assert.equal(both(4), false);
  assert.equal(all_<[unknown]>([])(1), true);
});

Deno.test("any_() passes when at least one callback passes (FLT-16)", () => {
  const either = any_([isBig, isEven]);
  assert.equal(either(11), true);
  assert.equal(either(4), true);
  assert.equal(either(3), false);
  assert.equal(any_<[unknown]>([])(1), false);
});

Deno.test("none_() passes when no callback passes (FLT-16)", () => {
  const neither = none_([isBig, isEven]);
  assert.equal(neither(3), true);
  assert.equal(neither(4), false);
  assert.equal(neither(11), false);
  assert.equal(none_<[unknown]>([])(1), true);
});

Deno.test("combinators work as value filters in matchValue() and matchMeta() (FLT-16)", () => {
  const cb = any_([(v: unknown) => v === "a", (v: unknown) => v === "b"]) as ValueCallback;
  assert.equal(matchValue(cb, "b", CTX), true);
  assert.equal(matchValue(not_(cb) as ValueCallback, "b", CTX), false);
  assert.equal(matchMeta({ app: cb }, { app: "a" }, CTX), true);
  assert.equal(matchMeta({ app: none_([cb]) as ValueCallback }, { app: "a" }, CTX), false);
});
