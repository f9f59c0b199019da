import assert from "node:assert/strict";
import { on } from "../api/on.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import { type ChangingCause, detectChangingCause } from "./causes.ts";
import { ABSENT, PRESENT, type ValueCallback } from "./filters.ts";
import type { ChangingHandler, WatchingHandler } from "./handlers.ts";
import {
  changingFilterContext,
  extraEssenceFields,
  getDefaultRegistry,
  matchChangingHandlers,
  OperatorRegistry,
  requiresFinalizer,
  setDefaultRegistry,
} from "./registries.ts";
import { parseSelector } from "./selectors.ts";

const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";
const SPEC = "kopfexamples";
const KEX: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  namespaced: true,
  verbs: ["list", "watch", "patch"],
  shortNames: ["kex"],
  categories: [],
  subresources: ["status"],
  preferred: true,
};

function obj(
  spec: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "kex1", namespace: "ns", uid: "u1", ...meta },
    spec,
  } as KubeObject;
}

function essence(body: KubeObject): Record<string, unknown> {
  const meta = body.metadata ?? {};
  const result: Record<string, unknown> = {};
  if (body.spec !== undefined) result.spec = body.spec;
  const m: Record<string, unknown> = {};
  if (meta.labels) m.labels = meta.labels;
  if (meta.annotations) m.annotations = meta.annotations;
  if (Object.keys(m).length) result.metadata = m;
  return result;
}

/** A cause detected as the reactor would, from the old essence and the current body. */
function causeOf(
  body: KubeObject,
  old: Record<string, unknown> | undefined,
  initial = false,
  deleted = false,
): ChangingCause {
  return detectChangingCause({
    body,
    deleted,
    finalizer: FINALIZER,
    old,
    new: essence(body),
    initial,
  });
}

const contexts: string[] = [];
const contextFor = (h: ChangingHandler) => {
  contexts.push(h.id);
  return { id: h.id, marker: "ctx" };
};

function changing(registry: OperatorRegistry): ChangingHandler[] {
  return registry.handlersFor(KEX).changing;
}

function ids(handlers: readonly { id: string }[]): string[] {
  return handlers.map((h) => h.id);
}

function handlerRecord(id: string, fn: () => unknown, extra: Partial<ChangingHandler> = {}) {
  return {
    kind: "changing",
    id,
    fn,
    param: undefined,
    reason: "create",
    fieldMustChange: false,
    requiresFinalizer: false,
    ...extra,
  } as ChangingHandler;
}

// --- register ------------------------------------------------------------------------------

Deno.test("OperatorRegistry.register() refuses another function with the same id (REG-04)", () => {
  const registry = new OperatorRegistry();
  const selector = parseSelector(SPEC);
  registry.register(selector, handlerRecord("fn", () => 1));
  assert.throws(
    () => registry.register(selector, handlerRecord("fn", () => 2)),
    /Duplicate handler id 'fn'/,
  );
  assert.equal(registry.registrations.length, 1);
});

Deno.test("OperatorRegistry.register() refuses a duplicate id via on.* too (REG-04)", () => {
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry, id: "same" }, function a() {});
  assert.throws(() => on.create(SPEC, { registry, id: "same" }, function b() {}), /Duplicate/);
});

Deno.test("OperatorRegistry.register() dedupes the same function registered twice (RSPEC-11, REG-07)", () => {
  const registry = new OperatorRegistry();
  const selector = parseSelector(SPEC);
  const fn = () => {};
  const first = handlerRecord("fn", fn);
  registry.register(selector, first);
  registry.register(selector, handlerRecord("fn", fn));
  assert.equal(registry.registrations.length, 1);
  assert.equal(registry.registrations[0]!.handler, first);
});

Deno.test("OperatorRegistry.register() keeps one function for several reasons (HK-CHG-10)", () => {
  const registry = new OperatorRegistry();
  const fn = function create_fn() {};
  on.resume(SPEC, { registry }, fn);
  on.create(SPEC, { registry }, fn);
  assert.deepEqual(registry.registrations.map((r) => (r.handler as ChangingHandler).reason), [
    "resume",
    "create",
  ]);
});

Deno.test("OperatorRegistry.register() allows the same id for different selectors (REG-08)", () => {
  const registry = new OperatorRegistry();
  registry.register(parseSelector("kopfexamples"), handlerRecord("fn", () => 1));
  registry.register(parseSelector("pods"), handlerRecord("fn", () => 2));
  assert.equal(registry.registrations.length, 2);
  assert.equal(registry.selectors().length, 2);
});

Deno.test({
  name: "OperatorRegistry.register() dedupes an identical on.event registration (RSPEC-11)",
  fn() {
    const registry = new OperatorRegistry();
    const fn = function watch_fn() {};
    on.event(SPEC, { registry }, fn);
    on.event(SPEC, { registry }, fn);
    assert.equal(registry.handlersFor(KEX).watching.length, 1);
  },
});

Deno.test("OperatorRegistry.handlersFor() splits changing and watching handlers in order (REG-08)", () => {
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry }, function c1() {});
  on.event(SPEC, { registry }, function e1() {});
  on.update(SPEC, { registry }, function u1() {});
  on.create("pods", { registry }, function other() {});
  const { changing: ch, watching } = registry.handlersFor(KEX);
  assert.deepEqual(ids(ch), ["c1", "u1"]);
  assert.deepEqual(ids(watching), ["e1"]);
  const served = new Set([JSON.stringify(parseSelector("pods"))]);
  assert.deepEqual(ids(registry.handlersFor(KEX, served).changing), ["other"]);
});

Deno.test("getDefaultRegistry()/setDefaultRegistry() swap the registry used by on.* (REG-08)", () => {
  const saved = getDefaultRegistry();
  const fresh = new OperatorRegistry();
  try {
    setDefaultRegistry(fresh);
    assert.equal(getDefaultRegistry(), fresh);
    on.create(SPEC, function default_registered() {});
    assert.deepEqual(ids(fresh.registrations.map((r) => r.handler)), ["default_registered"]);
    assert.equal(saved.registrations.some((r) => r.handler.id === "default_registered"), false);
  } finally {
    setDefaultRegistry(saved);
  }
});

// --- matchChangingHandlers: reasons ------------------------------------------------------------

function fullRegistry(): OperatorRegistry {
  const registry = new OperatorRegistry();
  on.create(SPEC, { registry }, function create_fn() {});
  on.update(SPEC, { registry }, function update_fn() {});
  on.delete(SPEC, { registry }, function delete_fn() {});
  on.resume(SPEC, { registry }, function resume_fn() {});
  return registry;
}

Deno.test("matchChangingHandlers() selects handlers by the cause reason (HK-CHG-03..05)", () => {
  const handlers = changing(fullRegistry());
  const body = obj({ a: 1 });
  const old = essence(obj({ a: 0 }));
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(body, undefined), body, contextFor)),
    ["create_fn"],
  );
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(body, old), body, contextFor)),
    ["update_fn"],
  );
  const deleting = obj({ a: 1 }, {
    deletionTimestamp: "2020-01-01T00:00:00Z",
    finalizers: [FINALIZER],
  });
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(deleting, old), deleting, contextFor)),
    ["delete_fn"],
  );
});

Deno.test("matchChangingHandlers() selects nothing for noop, free and gone causes (HK-CHG-15)", () => {
  const handlers = changing(fullRegistry());
  const body = obj({ a: 1 });
  const same = essence(body);
  const noop = causeOf(body, same, false);
  assert.equal(noop.reason, "noop");
  assert.deepEqual(matchChangingHandlers(handlers, noop, body, contextFor), []);
  const freeing = obj({ a: 1 }, { deletionTimestamp: "2020-01-01T00:00:00Z" });
  const free = causeOf(freeing, same);
  assert.equal(free.reason, "free");
  assert.deepEqual(matchChangingHandlers(handlers, free, freeing, contextFor), []);
  const gone = causeOf(body, same, true, true);
  assert.equal(gone.reason, "gone");
  assert.deepEqual(matchChangingHandlers(handlers, gone, body, contextFor), []);
});

Deno.test("matchChangingHandlers() runs resume handlers for unchanged objects at start (HK-CHG-08)", () => {
  const handlers = changing(fullRegistry());
  const body = obj({ a: 1 });
  const cause = causeOf(body, essence(body), true);
  assert.equal(cause.reason, "resume");
  assert.deepEqual(ids(matchChangingHandlers(handlers, cause, body, contextFor)), ["resume_fn"]);
});

Deno.test("matchChangingHandlers() mixes resume into an initial update, in declaration order (HK-CHG-09)", () => {
  const registry = new OperatorRegistry();
  on.resume(SPEC, { registry }, function resume_fn() {});
  on.update(SPEC, { registry }, function update_fn() {});
  const handlers = changing(registry);
  const body = obj({ a: 1 });
  const old = essence(obj({ a: 0 }));
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(body, old, true), body, contextFor)),
    ["resume_fn", "update_fn"],
  );
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(body, old, false), body, contextFor)),
    ["update_fn"],
  );
});

Deno.test("matchChangingHandlers() does not mix resume handlers into creation (SUB-12)", () => {
  const handlers = changing(fullRegistry());
  const body = obj({ a: 1 });
  const cause = causeOf(body, undefined, true);
  assert.deepEqual(ids(matchChangingHandlers(handlers, cause, body, contextFor)), ["create_fn"]);
});

Deno.test("matchChangingHandlers() skips resume for objects being deleted unless deleted=true (HK-CHG-11)", () => {
  const registry = new OperatorRegistry();
  on.resume(SPEC, { registry }, function plain_resume() {});
  on.resume(SPEC, { registry, deleted: true }, function deleted_resume() {});
  const handlers = changing(registry);
  const body = obj({ a: 1 }, { deletionTimestamp: "2020-01-01T00:00:00Z" });
  const cause: ChangingCause = {
    reason: "resume",
    initial: true,
    old: essence(body),
    new: essence(body),
    diff: [],
  };
  assert.deepEqual(ids(matchChangingHandlers(handlers, cause, body, contextFor)), [
    "deleted_resume",
  ]);
  const alive = obj({ a: 1 });
  assert.deepEqual(ids(matchChangingHandlers(handlers, cause, alive, contextFor)), [
    "plain_resume",
    "deleted_resume",
  ]);
});

Deno.test("matchChangingHandlers() does not resume an object found being deleted at start (HK-CHG-11)", () => {
  const handlers = changing(fullRegistry());
  const body = obj({ a: 1 }, {
    deletionTimestamp: "2020-01-01T00:00:00Z",
    finalizers: [FINALIZER],
  });
  const cause = causeOf(body, essence(body), true);
  assert.equal(cause.reason, "delete");
  assert.deepEqual(ids(matchChangingHandlers(handlers, cause, body, contextFor)), ["delete_fn"]);
});

Deno.test({
  name:
    "matchChangingHandlers() runs resume(deleted=true) with delete handlers at start (HK-CHG-11, OPT-14)",
  fn() {
    const registry = new OperatorRegistry();
    on.resume(SPEC, { registry, deleted: true }, function deleted_resume() {});
    on.delete(SPEC, { registry }, function delete_fn() {});
    const handlers = changing(registry);
    const body = obj({ a: 1 }, {
      deletionTimestamp: "2020-01-01T00:00:00Z",
      finalizers: [FINALIZER],
    });
    const cause = causeOf(body, essence(body), true);
    assert.deepEqual(ids(matchChangingHandlers(handlers, cause, body, contextFor)), [
      "deleted_resume",
      "delete_fn",
    ]);
  },
});

Deno.test("matchChangingHandlers() lists one function registered for create and resume once (REG-07, HK-CHG-10)", () => {
  const registry = new OperatorRegistry();
  const fn = function my_handler() {};
  on.resume(SPEC, { registry }, fn);
  on.create(SPEC, { registry }, fn);
  on.update(SPEC, { registry }, fn);
  const handlers = changing(registry);
  assert.equal(handlers.length, 3);
  const body = obj({ a: 1 });
  const initialUpdate = causeOf(body, essence(obj({ a: 0 })), true);
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, initialUpdate, body, contextFor)),
    ["my_handler"],
  );
  assert.deepEqual(
    ids(matchChangingHandlers(handlers, causeOf(body, undefined, true), body, contextFor)),
    ["my_handler"],
  );
});

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

// --- requiresFinalizer / extraEssenceFields -----------------------------------------------------

Deno.test("requiresFinalizer() is true only for matching non-optional delete handlers (HK-CHG-06, HK-CHG-07, OPT-20)", () => {
  const body = obj({}, { labels: { app: "web" } });
  const none = new OperatorRegistry();
  on.create(SPEC, { registry: none }, function c() {});
  on.resume(SPEC, { registry: none }, function r() {});
  assert.equal(requiresFinalizer(changing(none), body, contextFor), false);

  const optional = new OperatorRegistry();
  on.delete(SPEC, { registry: optional, optional: true }, function d() {});
  assert.equal(requiresFinalizer(changing(optional), body, contextFor), false);

  const needed = new OperatorRegistry();
  on.delete(SPEC, { registry: needed }, function d() {});
  assert.equal(requiresFinalizer(changing(needed), body, contextFor), true);

  const filtered = new OperatorRegistry();
  on.delete(SPEC, { registry: filtered, labels: { app: "db" } }, function d() {});
  assert.equal(requiresFinalizer(changing(filtered), body, contextFor), false);
  assert.equal(
    requiresFinalizer(changing(filtered), obj({}, { labels: { app: "db" } }), contextFor),
    true,
  );
});

Deno.test("extraEssenceFields() lists status and metadata fields of handlers (SUB-10, PST-34)", () => {
  const registry = new OperatorRegistry();
  on.field(SPEC, { registry, field: "status.phase" }, function phase() {});
  on.field(SPEC, { registry, field: "spec.size" }, function size() {});
  on.update(SPEC, { registry, field: ["metadata", "ownerReferences"] }, function owners() {});
  on.create(SPEC, { registry }, function plain() {});
  assert.deepEqual(extraEssenceFields(changing(registry)), [
    ["status", "phase"],
    ["metadata", "ownerReferences"],
  ]);
});

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

Deno.test("OperatorRegistry.register() allows one id for a watching and a changing handler (REG-08)", () => {
  const registry = new OperatorRegistry();
  const watcher: WatchingHandler = {
    kind: "watching",
    id: "w",
    fn: () => {},
    param: undefined,
  };
  registry.register(parseSelector(SPEC), watcher);
  registry.register(parseSelector(SPEC), handlerRecord("w", () => {}));
  const { changing: ch, watching } = registry.handlersFor(KEX);
  assert.deepEqual(ids(ch), ["w"]);
  assert.deepEqual(watching, [watcher]);
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
