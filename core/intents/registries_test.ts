/**
 * Unit tests of the operator registry itself: registering handlers (duplicate ids refused, the
 * same function deduplicated, one id per selector and kind), looking them up per resource, the
 * default registry of `on.*`, and the questions asked of a resource's changing handlers as a
 * whole: whether the object needs a finalizer, which extra fields its essence keeps.
 * @module
 */
import assert from "node:assert/strict";
import { on } from "../api/on.ts";
import type { ChangingHandler, WatchingHandler } from "./handlers.ts";
import {
  extraEssenceFields,
  getDefaultRegistry,
  OperatorRegistry,
  requiresFinalizer,
  setDefaultRegistry,
} from "./registries.ts";
import { parseSelector } from "./selectors.ts";
import { changing, contextFor, ids, KEX, obj, SPEC } from "./_registries_test_support.ts";

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
