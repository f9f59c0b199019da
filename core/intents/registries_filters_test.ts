/**
 * Unit tests of `matchChangingHandlers()` by the handlers' filters: `field=` with `value=`,
 * `old=` and `new=` (on creation, on changes, never on resume or delete), labels and
 * annotations, `when=` callbacks and their AND-ing, and the filter contexts: built lazily, once,
 * only for handlers with callback filters, and narrowed to the handler's field
 * (`changingFilterContext()`).
 * @module
 */
import assert from "node:assert/strict";
import { on } from "../api/on.ts";
import { ABSENT, PRESENT, type ValueCallback } from "./filters.ts";
import { changingFilterContext, matchChangingHandlers, OperatorRegistry } from "./registries.ts";
import {
  causeOf,
  changing,
  contextFor,
  contexts,
  essence,
  FINALIZER,
  ids,
  obj,
  SPEC,
} from "./_registries_test_support.ts";

// --- matchChangingHandlers: fields -------------------------------------------------------------

Deno.test("matchChangingHandlers() fires field handlers on creation when the field appears (HK-CHG-13, SUB-15)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "spec.field" }, function field_fn() {});
  const handlers = changing(registry);
  const withField = obj({ field: "x" });
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(withField, undefined), withField, contextFor)),
    ["field_fn/spec.field"],
  );
  const without = obj({ other: "x" });
  assert.deepEqual(
    matchChangingHandlers(handlers, causeOf(without, undefined), without, contextFor),
    [],
  );
});

Deno.test("matchChangingHandlers() fires field handlers only when the field changes (FLT-09, FLT-13)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "spec.field" }, function field_fn() {});
  const handlers = changing(registry);
  const old = essence(obj({ field: "a", other: 1 }));
  const changed = obj({ field: "b", other: 1 });
  const unrelated = obj({ field: "a", other: 2 });
  const removed = obj({ other: 1 });
  assert.equal(
    matchChangingHandlers(handlers, causeOf(changed, old), changed, contextFor).length,
    1,
  );
  assert.equal(
    matchChangingHandlers(handlers, causeOf(unrelated, old), unrelated, contextFor).length,
    0,
  );
  assert.equal(
    matchChangingHandlers(handlers, causeOf(removed, old), removed, contextFor).length,
    1,
  );
  // A parent stanza added as a whole still counts as a change of the field.
  const noSpec = { metadata: { labels: { a: "b" } } };
  const added = obj({ field: "x" }, { labels: { a: "b" } });
  assert.equal(
    matchChangingHandlers(handlers, causeOf(added, noSpec), added, contextFor).length,
    1,
  );
});

Deno.test("matchChangingHandlers() never fires field handlers for resume or delete causes (HK-CHG-13)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "spec.field" }, function field_fn() {});
  const handlers = changing(registry);
  const body = obj({ field: "x" });
  assert.deepEqual(
    matchChangingHandlers(handlers, causeOf(body, essence(body), true), body, contextFor),
    [],
  );
  const deleting = obj({ field: "x" }, {
    deletionTimestamp: "2020-01-01T00:00:00Z",
    finalizers: [FINALIZER],
  });
  assert.deepEqual(
    matchChangingHandlers(handlers, causeOf(deleting, essence(body)), deleting, contextFor),
    [],
  );
});

Deno.test("matchChangingHandlers() fires update handlers with a field only on field changes, not on creation (HK-CHG-14, FLT-09)", () => {
  const registry = new OperatorRegistry();
  on.update(SPEC, { registry, field: "spec.field" }, function upd() {});
  const handlers = changing(registry);
  const old = essence(obj({ field: "a", other: 1 }));
  const changed = obj({ field: "b", other: 1 });
  const unrelated = obj({ field: "a", other: 2 });
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(changed, old), changed, contextFor)),
    ["upd/spec.field"],
  );
  assert.deepEqual(
    matchChangingHandlers(handlers, causeOf(unrelated, old), unrelated, contextFor),
    [],
  );
  assert.deepEqual(
    matchChangingHandlers(handlers, causeOf(changed, undefined), changed, contextFor),
    [],
  );
});

Deno.test("matchChangingHandlers() matches value= if the old or the new value satisfies it (FLT-10, SUB-15)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "spec.field", value: "x" }, function value_fn() {});
  const handlers = changing(registry);
  const check = (from: Record<string, unknown> | undefined, to: Record<string, unknown>) => {
    const body = obj(to);
    const old = from === undefined ? undefined : essence(obj(from));
    return matchChangingHandlers(handlers, causeOf(body, old), body, contextFor).length === 1;
  };
  assert.equal(check({ field: "a" }, { field: "x" }), true, "new matches");
  assert.equal(check({ field: "x" }, { field: "b" }), true, "old matches");
  assert.equal(check({ field: "a" }, { field: "b" }), false, "neither matches");
  assert.equal(check(undefined, { field: "x" }), true, "created with the value");
  assert.equal(check(undefined, { field: "y" }), false, "created with another value");
  assert.equal(check({ field: "x", n: 1 }, { field: "x", n: 2 }), false, "field unchanged");
});

Deno.test("matchChangingHandlers() checks old= and new= separately (FLT-12)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "spec.f", old: "a", id: "old_a" }, () => {});
  on.field(SPEC, { registry, field: "spec.f", new: "b", id: "new_b" }, () => {});
  on.field(SPEC, { registry, field: "spec.f", old: "a", new: "b", id: "a_to_b" }, () => {});
  on.field(
    SPEC,
    { registry, field: "spec.f", old: ABSENT, new: PRESENT, id: "appeared" },
    () => {},
  );
  const handlers = changing(registry);
  const run = (from: Record<string, unknown>, to: Record<string, unknown>) => {
    const body = obj(to);
    return ids(
      matchChangingHandlers(handlers, causeOf(body, essence(obj(from))), body, contextFor),
    );
  };
  const [oldA, newB, aToB, appeared] = ["old_a", "new_b", "a_to_b", "appeared"].map((id) =>
    `${id}/spec.f`
  );
  assert.deepEqual(run({ f: "a" }, { f: "b" }), [oldA, newB, aToB]);
  assert.deepEqual(run({ f: "a" }, { f: "c" }), [oldA]);
  assert.deepEqual(run({ f: "c" }, { f: "b" }), [newB]);
  assert.deepEqual(run({ g: 1 }, { f: "b", g: 1 }), [newB, appeared]);
  assert.deepEqual(run({ f: "a", g: 1 }, { f: "a", g: 2 }), []);
});

Deno.test("matchChangingHandlers() passes the field value and context to value callbacks (FLT-14)", () => {
  const registry = new OperatorRegistry();
  const seen: unknown[] = [];
  const cb = ((value: unknown, context: unknown) => {
    seen.push([value, context]);
    return value === 5;
  }) as ValueCallback;
  on.field(SPEC, { registry, field: "spec.size", value: cb }, function size_fn() {});
  const handlers = changing(registry);
  const body = obj({ size: 5 });
  const result = matchChangingHandlers(handlers, causeOf(body, essence(obj({ size: 4 }))), body, (
    h,
  ) => ({ id: h.id }));
  assert.deepEqual(ids(result), ["size_fn/spec.size"]);
  assert.deepEqual(seen, [
    [4, { id: "size_fn/spec.size" }],
    [5, { id: "size_fn/spec.size" }],
  ]);
});

Deno.test("matchChangingHandlers() checks a create handler's field against the current state (FLT-11)", () => {
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry, field: "spec.mode" }, function present_fn() {});
  on.create(SPEC, { registry, field: "spec.mode", value: "fast" }, function fast_fn() {});
  const handlers = changing(registry);
  const fast = obj({ mode: "fast" });
  const slow = obj({ mode: "slow" });
  const none = obj({});
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(fast, undefined), fast, contextFor)),
    ["present_fn/spec.mode", "fast_fn/spec.mode"],
  );
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(slow, undefined), slow, contextFor)),
    ["present_fn/spec.mode"],
  );
  assert.deepEqual(matchChangingHandlers(handlers, causeOf(none, undefined), none, contextFor), []);
});

// --- matchChangingHandlers: metadata and when filters -------------------------------------------

Deno.test("matchChangingHandlers() applies label and annotation filters (FLT-04, FLT-05)", () => {
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry, labels: { app: "web" } }, function by_label() {});
  on.create(SPEC, { registry, labels: { app: PRESENT, tier: ABSENT } }, function presence() {});
  on.create(SPEC, { registry, annotations: { note: "yes" } }, function by_annotation() {});
  const handlers = changing(registry);
  const run = (meta: Record<string, unknown>) => {
    const body = obj({}, meta);
    return ids(matchChangingHandlers(handlers, causeOf(body, undefined), body, contextFor));
  };
  assert.deepEqual(run({ labels: { app: "web" } }), ["by_label", "presence"]);
  assert.deepEqual(run({ labels: { app: "db", tier: "x" } }), []);
  assert.deepEqual(run({ labels: { app: "" }, annotations: { note: "yes" } }), [
    "presence",
    "by_annotation",
  ]);
  assert.deepEqual(run({}), []);
});

Deno.test("matchChangingHandlers() applies when= with the handler's context (FLT-15)", () => {
  const registry = new OperatorRegistry();
  const seen: unknown[] = [];
  on.create(SPEC, {
    registry,
    when: ((context: { id: string }) => {
      seen.push(context);
      return context.id === "yes_fn";
    }) as never,
  }, function yes_fn() {});
  on.create(SPEC, { registry, when: (() => false) as never }, function no_fn() {});
  const handlers = changing(registry);
  const body = obj({});
  const result = matchChangingHandlers(handlers, causeOf(body, undefined), body, (h) => ({
    id: h.id,
  }));
  assert.deepEqual(ids(result), ["yes_fn"]);
  assert.deepEqual(seen, [{ id: "yes_fn" }]);
});

Deno.test("matchChangingHandlers() AND-s labels, field and when filters (FLT-01)", () => {
  const registry = new OperatorRegistry();
  let whenCalls = 0;
  on.create(SPEC, {
    registry,
    labels: { app: "web" },
    field: "spec.mode",
    value: "fast",
    when: (() => {
      whenCalls++;
      return true;
    }) as never,
  }, function combined() {});
  const handlers = changing(registry);
  const run = (spec: Record<string, unknown>, labels: Record<string, string>) => {
    const body = obj(spec, { labels });
    return matchChangingHandlers(handlers, causeOf(body, undefined), body, contextFor).length;
  };
  assert.equal(run({ mode: "fast" }, { app: "web" }), 1);
  assert.equal(run({ mode: "slow" }, { app: "web" }), 0);
  assert.equal(run({ mode: "fast" }, { app: "db" }), 0);
  assert.equal(whenCalls, 1, "when= is not called once another filter failed");
});

// --- filter contexts ----------------------------------------------------------------------------

Deno.test("matchChangingHandlers() builds contexts lazily per handler (FLT-18)", () => {
  contexts.length = 0;
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry, when: () => true }, function c() {});
  on.create(SPEC, { registry, labels: { a: ABSENT } }, function plain() {});
  on.update(SPEC, { registry, when: () => true }, function u() {});
  const handlers = changing(registry);
  const body = obj({});
  const matched = matchChangingHandlers(handlers, causeOf(body, undefined), body, contextFor);
  assert.deepEqual(ids(matched), ["c", "plain"]);
  assert.equal(contexts.includes("u"), false, "not for handlers of another cause");
  assert.equal(contexts.includes("c"), true, "for handlers with callback filters");
  assert.equal(contexts.includes("plain"), false, "not for handlers without callbacks");
});

Deno.test("changingFilterContext() adds the cause to the base context, narrowed to the handler's field (FLT-15)", () => {
  const registry = new OperatorRegistry();
  on.update(SPEC, { registry }, function whole() {});
  on.update(SPEC, { registry, field: "spec.a" }, function narrow() {});
  const [whole, narrow] = changing(registry);
  const body = obj({ a: 2, b: 1 });
  const cause = causeOf(body, { spec: { a: 1, b: 1 } });
  const base = { memo: { m: 1 }, spec: body.spec };
  const full = changingFilterContext(base, cause, whole!);
  assert.equal(full.reason, "update");
  assert.deepEqual(full.diff, [["change", ["spec", "a"], 1, 2]]);
  assert.deepEqual(full.old, { spec: { a: 1, b: 1 } });
  assert.deepEqual((full.new as { spec: unknown }).spec, { a: 2, b: 1 });
  assert.deepEqual(full.memo, { m: 1 });
  const field = changingFilterContext(base, cause, narrow!);
  assert.deepEqual(field.diff, [["change", [], 1, 2]]);
  assert.equal(field.old, 1);
  assert.equal(field.new, 2);
});

Deno.test("matchChangingHandlers() gives when= the cause and builds a context only for callback filters, once (FLT-15)", () => {
  const registry = new OperatorRegistry();
  const seen: Array<Record<string, unknown>> = [];
  on.update(SPEC, { registry }, function plain() {});
  on.update(SPEC, {
    registry,
    field: "spec.a",
    new: (value: unknown) => value === 2,
    when: ((ctx: Record<string, unknown>) => {
      seen.push(ctx);
      return ctx.reason === "update" && (ctx.memo as { ok?: boolean }).ok === true;
    }) as never,
  }, function guarded() {});
  const body = obj({ a: 2 });
  const cause = causeOf(body, { spec: { a: 1 } });
  let built = 0;
  const result = matchChangingHandlers(changing(registry), cause, body, (h) => {
    built++;
    return changingFilterContext({ memo: { ok: true }, id: h.id }, cause, h);
  });
  assert.deepEqual(ids(result), ["plain", "guarded/spec.a"]);
  assert.equal(built, 1, "one context, for the one handler with callback filters");
  assert.equal(seen.length, 1);
  assert.deepEqual(
    [seen[0]!.reason, seen[0]!.diff, seen[0]!.old, seen[0]!.new],
    ["update", [["change", [], 1, 2]], 1, 2],
  );
});
