// Tests of handler records: defaultHandlerId() and the records that the registration API
// (core/api/on.ts and its _on_*.ts) builds and validates. Kept here, beside handlers.ts, as the records are defined
// in this layer.
import assert from "node:assert/strict";
import { index } from "../api/indexing.ts";
import { on } from "../api/on.ts";
import { daemon, timer } from "../api/spawning.ts";
import { ABSENT, PRESENT } from "./filters.ts";
import {
  type ChangingHandler,
  defaultHandlerId,
  handlerId,
  type WatchingHandler,
} from "./handlers.ts";
import { getDefaultRegistry, OperatorRegistry, setDefaultRegistry } from "./registries.ts";
import { EVERYTHING } from "./selectors.ts";

function only<H>(registry: OperatorRegistry): H {
  assert.equal(registry.registrations.length, 1);
  return registry.registrations[0]!.handler as H;
}

// --- defaultHandlerId ------------------------------------------------------------------------

Deno.test("defaultHandlerId() is the function name (REG-04)", () => {
  function create_fn() {}
  assert.equal(defaultHandlerId(create_fn), "create_fn");
  const arrow = () => {};
  assert.equal(defaultHandlerId(arrow), "arrow");
});

Deno.test("defaultHandlerId() appends the dotted field (REG-05)", () => {
  function fn() {}
  assert.equal(defaultHandlerId(fn, ["spec", "field"]), "fn/spec.field");
  assert.equal(defaultHandlerId(fn, []), "fn");
});

Deno.test("defaultHandlerId() prefixes the parent id for sub-handlers (REG-06)", () => {
  function item1() {}
  assert.equal(defaultHandlerId(item1, undefined, "create_fn"), "create_fn/item1");
  assert.equal(defaultHandlerId(item1, ["spec", "x"], "parent"), "parent/item1/spec.x");
});

Deno.test("defaultHandlerId() uses the underlying name of bound functions (REG-01, REG-04)", () => {
  const holder = {
    method() {
      return this;
    },
  };
  assert.equal(defaultHandlerId(holder.method.bind(holder)), "method");
});

Deno.test("defaultHandlerId() gives anonymous functions a stable source-based id (REG-04)", () => {
  const make = () => [(x: number) => x + 1][0]!;
  const a = make();
  const b = make();
  const id = defaultHandlerId(a);
  assert.match(id, /^lambda-[0-9a-f]+$/);
  assert.equal(defaultHandlerId(b), id);
  const other = [(x: number) => x + 2][0]!;
  assert.notEqual(defaultHandlerId(other), id);
});

// --- on.*: ids and records -----------------------------------------------------------------------

Deno.test("on.create() registers a record with the function name as id and returns the function (REG-04)", () => {
  const registry = new OperatorRegistry();
  function create_fn() {}
  const returned = on.create("kopfexamples", { registry, param: 42 }, create_fn);
  assert.equal(returned, create_fn);
  const handler = only<ChangingHandler>(registry);
  assert.equal(handler.kind, "changing");
  assert.equal(handler.id, "create_fn");
  assert.equal(handler.fn, create_fn);
  assert.equal(handler.reason, "create");
  assert.equal(handler.param, 42);
  assert.equal(handler.fieldMustChange, false);
  assert.equal(handler.requiresFinalizer, false);
  assert.deepEqual(registry.registrations[0]!.selector, { name: "kopfexamples" });
});

Deno.test("on.*() without options register the function in the default registry (REG-08)", () => {
  const saved = getDefaultRegistry();
  const registry = new OperatorRegistry();
  const no_options = () => {};
  try {
    setDefaultRegistry(registry);
    assert.equal(on.update(["kopf.dev", "v1", "kopfexamples"], no_options), no_options);
    assert.equal(on.event("pods", no_options), no_options);
  } finally {
    setDefaultRegistry(saved);
  }
  assert.deepEqual(
    registry.registrations.map((r) => [r.handler.kind, r.handler.id, r.selector]),
    [
      ["changing", "no_options", { group: "kopf.dev", version: "v1", name: "kopfexamples" }],
      ["watching", "no_options", { name: "pods" }],
    ],
  );
});

Deno.test("on.*() with a field suffix the default id with /field (REG-05, OPT-03)", () => {
  const registry = new OperatorRegistry();
  function fn() {}
  on.field("kopfexamples", { registry, field: "spec.field" }, fn);
  on.update("kopfexamples", { registry, field: ["spec", "other"] }, fn);
  on.create("kopfexamples", { registry, field: "status.phase" }, fn);
  assert.deepEqual(registry.registrations.map((r) => r.handler.id), [
    "fn/spec.field",
    "fn/spec.other",
    "fn/status.phase",
  ]);
  assert.deepEqual((registry.registrations[0]!.handler as ChangingHandler).field, [
    "spec",
    "field",
  ]);
});

Deno.test("on.*() use an explicit id as given (REG-04, OPT-03)", () => {
  const registry = new OperatorRegistry();
  on.create("kopfexamples", { registry, id: "custom" }, function fn() {});
  assert.equal(only<ChangingHandler>(registry).id, "custom");
});

Deno.test("on.*() append the field to an explicit id too, as Kopf does (REG-05, OPT-03)", () => {
  const registry = new OperatorRegistry();
  function fn() {}
  on.field("kopfexamples", { registry, id: "field_fn", field: "spec.field" }, fn);
  on.create("kopfexamples", { registry, id: "c", field: "spec.a" }, fn);
  on.update("kopfexamples", { registry, id: "u", field: ["spec", "b"] }, fn);
  on.resume("kopfexamples", { registry, id: "r", field: "spec.c" }, fn);
  on.delete("kopfexamples", { registry, id: "d", field: "spec.d" }, fn);
  on.event("kopfexamples", { registry, id: "e", field: "spec.e" }, fn);
  daemon("kopfexamples", { registry, id: "dm", field: "spec.f" }, fn);
  timer("kopfexamples", { registry, id: "t", field: "spec.g", interval: 1 }, fn);
  on.validate("kopfexamples", { registry, id: "v", field: "spec.h" }, fn);
  on.mutate("kopfexamples", { registry, id: "m", field: "spec.i" }, fn);
  index("kopfexamples", { registry, id: "i", field: "spec.j" }, fn);
  index("kopfexamples", { registry, field: "spec.k" }, function idx() {});
  on.create("kopfexamples", { registry, id: "plain" }, fn);
  const ids = [
    ...registry.registrations.map((r) => r.handler.id),
    ...registry.webhooks().map((r) => r.handler.id),
  ];
  assert.deepEqual(ids.sort(), [
    "c/spec.a",
    "d/spec.d",
    "dm/spec.f",
    "e/spec.e",
    "field_fn/spec.field",
    "i",
    "idx",
    "m/spec.i",
    "plain",
    "r/spec.c",
    "t/spec.g",
    "u/spec.b",
    "v/spec.h",
  ]);
});

Deno.test("handlerId() applies Kopf's rule: id or name, then /field, then parent/ (REG-04..06)", () => {
  function fn() {}
  assert.equal(handlerId(undefined, fn), "fn");
  assert.equal(handlerId("x", fn), "x");
  assert.equal(handlerId("x", fn, ["spec", "f"]), "x/spec.f");
  assert.equal(handlerId(undefined, fn, ["spec", "f"]), "fn/spec.f");
  assert.equal(handlerId("x", fn, undefined, "p"), "p/x");
  assert.equal(handlerId("x", fn, [], "p"), "p/x");
});

Deno.test("on.field() registers for any reason with the field required to change (HK-CHG-12, SUB-15)", () => {
  const registry = new OperatorRegistry();
  on.field("kopfexamples", { registry, field: "spec.x", old: "a", new: "b" }, function f() {});
  const handler = only<ChangingHandler>(registry);
  assert.equal(handler.reason, undefined);
  assert.equal(handler.fieldMustChange, true);
  assert.equal(handler.old, "a");
  assert.equal(handler.new, "b");
});

Deno.test("on.update() with a field behaves like a field handler for updates (HK-CHG-14)", () => {
  const registry = new OperatorRegistry();
  on.update("kopfexamples", { registry, field: "spec.x" }, function u() {});
  on.update("kopfexamples", { registry }, function plain() {});
  const [withField, plain] = registry.registrations.map((r) => r.handler as ChangingHandler);
  assert.equal(withField!.reason, "update");
  assert.equal(withField!.fieldMustChange, true);
  assert.equal(plain!.fieldMustChange, false);
});

Deno.test("on.delete() requires the finalizer unless optional (HK-CHG-06, HK-CHG-07, OPT-13, OPT-20)", () => {
  const registry = new OperatorRegistry();
  on.delete("kopfexamples", { registry }, function required() {});
  on.delete("kopfexamples", { registry, optional: true }, function optional() {});
  on.create("kopfexamples", { registry }, function creator() {});
  assert.deepEqual(
    registry.registrations.map((
      r,
    ) => [r.handler.id, (r.handler as ChangingHandler).requiresFinalizer]),
    [["required", true], ["optional", false], ["creator", false]],
  );
});

Deno.test("on.resume() keeps the deleted flag (OPT-14)", () => {
  const registry = new OperatorRegistry();
  on.resume("kopfexamples", { registry, deleted: true }, function r() {});
  const handler = only<ChangingHandler>(registry);
  assert.equal(handler.reason, "resume");
  assert.equal(handler.deleted, true);
});

Deno.test("on.create() passes error-handling options through (OPT-05..08)", () => {
  const registry = new OperatorRegistry();
  on.create(
    "kopfexamples",
    { registry, errors: "permanent", timeout: 30, retries: 3, backoff: 5 },
    function c() {},
  );
  const handler = only<ChangingHandler>(registry);
  assert.deepEqual(
    [handler.errors, handler.timeout, handler.retries, handler.backoff],
    ["permanent", 30, 3, 5],
  );
});

Deno.test("on.event() registers a watching record with filters (HK-EVT-04)", () => {
  const registry = new OperatorRegistry();
  function watch_fn() {}
  const returned = on.event(EVERYTHING, {
    registry,
    labels: { app: PRESENT },
    annotations: { skip: ABSENT },
    field: "spec.x",
    value: "y",
  }, watch_fn);
  assert.equal(returned, watch_fn);
  const handler = only<WatchingHandler>(registry);
  assert.equal(handler.kind, "watching");
  assert.equal(handler.id, "watch_fn/spec.x");
  assert.deepEqual(handler.labels, { app: PRESENT });
  assert.deepEqual(handler.annotations, { skip: ABSENT });
  assert.deepEqual(handler.field, ["spec", "x"]);
  assert.equal(handler.value, "y");
  assert.deepEqual(registry.registrations[0]!.selector, { everything: true });
});

// --- on.*: validation ------------------------------------------------------------------------

Deno.test("on.*() reject value/old/new without a field (OPT-21)", () => {
  const registry = new OperatorRegistry();
  const fn = () => {};
  assert.throws(() => on.create("kex", { registry, value: "x" }, fn), TypeError);
  assert.throws(() => on.update("kex", { registry, old: "x" }, fn), TypeError);
  assert.throws(() => on.update("kex", { registry, new: "x" }, fn), TypeError);
  assert.throws(() => on.event("kex", { registry, value: PRESENT }, fn), TypeError);
  assert.equal(registry.registrations.length, 0);
});

Deno.test("on.*() reject value together with old or new (OPT-21, FLT-12)", () => {
  const registry = new OperatorRegistry();
  const fn = () => {};
  assert.throws(
    () => on.update("kex", { registry, field: "spec.x", value: "a", old: "b" }, fn),
    /mutually exclusive/,
  );
  assert.throws(
    () => on.field("kex", { registry, field: "spec.x", value: "a", new: "b" }, fn),
    /mutually exclusive/,
  );
  assert.equal(registry.registrations.length, 0);
});

Deno.test("on.*() reject null label and annotation filters (OPT-21)", () => {
  const registry = new OperatorRegistry();
  const fn = () => {};
  assert.throws(
    () => on.create("kex", { registry, labels: { app: null as unknown as string } }, fn),
    /PRESENT or ABSENT/,
  );
  assert.throws(
    () => on.event("kex", { registry, annotations: { a: null as unknown as string } }, fn),
    /PRESENT or ABSENT/,
  );
  assert.equal(registry.registrations.length, 0);
});

Deno.test("on.field() requires a field (HK-CHG-12)", () => {
  const registry = new OperatorRegistry();
  const fn = () => {};
  assert.throws(
    () => on.field("kex", { registry } as unknown as Parameters<typeof on.field>[1], fn),
    /needs a field/,
  );
  assert.throws(
    () => on.field("kex", { registry, field: null }, fn),
    /needs a field/,
  );
  assert.equal(registry.registrations.length, 0);
});

Deno.test("on.*() accept a field with value, old or new (OPT-11, OPT-12)", () => {
  const registry = new OperatorRegistry();
  on.create("kex", { registry, field: "spec.x", value: "a" }, function a() {});
  on.update("kex", { registry, field: "spec.x", old: "a", new: "b" }, function b() {});
  on.field("kex", { registry, field: "spec.x", value: PRESENT }, function c() {});
  assert.equal(registry.registrations.length, 3);
});

Deno.test("on.daemon(), on.timer() and on.index() register what daemon(), timer() and index() do (API-19)", () => {
  const viaOn = new OperatorRegistry();
  on.daemon("kex", { registry: viaOn, cancellationTimeout: 3 }, function d() {});
  on.timer("kex", { registry: viaOn, interval: 5 }, function t() {});
  on.index("kex", { registry: viaOn }, function i() {});
  const kinds = viaOn.registrations.map(({ handler }) =>
    handler.kind === "spawning" ? `${handler.spawn}:${handler.id}` : `${handler.kind}:${handler.id}`
  );
  assert.deepEqual(kinds, ["daemon:d", "timer:t", "indexing:i"]);
  assert.equal((viaOn.registrations[1]!.handler as { interval?: number }).interval, 5);
  assert.deepEqual(viaOn.indexIds(), ["i"]);
  assert.equal(on.daemon, daemon);
  assert.equal(on.timer, timer);
  assert.equal(on.index, index);
});
