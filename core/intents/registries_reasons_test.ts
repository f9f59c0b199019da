/**
 * Unit tests of `matchChangingHandlers()` by the cause's reason: create, update and delete
 * handlers for their causes, none for noop, free and gone; resume handlers at the start of an
 * operator run (mixed into an initial update, not into a creation, not for objects being deleted
 * unless they ask for it), and one function registered for several reasons listed once.
 * @module
 */
import assert from "node:assert/strict";
import { on } from "../api/on.ts";
import type { ChangingCause } from "./causes.ts";
import { matchChangingHandlers, OperatorRegistry } from "./registries.ts";
import {
  causeOf,
  changing,
  contextFor,
  essence,
  FINALIZER,
  ids,
  obj,
  SPEC,
} from "./_registries_test_support.ts";

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
