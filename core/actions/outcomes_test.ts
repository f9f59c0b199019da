import assert from "node:assert/strict";
import { Patch } from "../structs/patches.ts";
import { HandlerResultError, PermanentError, TemporaryError } from "./execution.ts";
import { deliverResult, storableOutcome, storageProblem } from "./outcomes.ts";

const success = (result: unknown) => ({ kind: "success", result }) as const;

Deno.test("deliverResult() stores a result under status.<id> (RES-01)", () => {
  const patch = new Patch();
  deliverResult(patch, "create_fn", success({ message: "hello" }));
  assert.deepEqual(patch.toJSON(), { status: { create_fn: { message: "hello" } } });
});

Deno.test("deliverResult() merges object results into what the cycle delivered (RES-02, SUB-78)", () => {
  const patch = new Patch();
  deliverResult(patch, "fn", success({ a: 1, b: { x: 1 } }));
  deliverResult(patch, "fn", success({ b: { y: 2 }, c: 3 }));
  assert.deepEqual(patch.toJSON(), { status: { fn: { a: 1, b: { y: 2 }, c: 3 } } });
});

Deno.test("deliverResult() merges with a handler's own edits of status.<id> (RES-02)", () => {
  const patch = new Patch();
  patch.status["fn"] = { edited: true };
  deliverResult(patch, "fn", success({ returned: true }));
  assert.deepEqual(patch.status["fn"], { edited: true, returned: true });
});

Deno.test("deliverResult() replaces with scalar and list results (RES-02, SUB-78)", () => {
  const patch = new Patch();
  deliverResult(patch, "fn", success({ a: 1 }));
  deliverResult(patch, "fn", success(42));
  assert.equal(patch.status["fn"], 42);
  deliverResult(patch, "fn", success(["x", "y"]));
  assert.deepEqual(patch.status["fn"], ["x", "y"]);
  deliverResult(patch, "fn", success({ a: 2 }));
  assert.deepEqual(patch.status["fn"], { a: 2 });
  deliverResult(patch, "other", success("text"));
  deliverResult(patch, "flag", success(false));
  deliverResult(patch, "zero", success(0));
  assert.deepEqual(patch.toJSON(), {
    status: { fn: { a: 2 }, other: "text", flag: false, zero: 0 },
  });
});

Deno.test("deliverResult() ignores null and undefined results (RES-02)", () => {
  const patch = new Patch();
  deliverResult(patch, "fn", success(undefined));
  deliverResult(patch, "fn", success(null));
  assert.equal(patch.isEmpty, true);
  deliverResult(patch, "kept", success({ a: 1 }));
  deliverResult(patch, "kept", success(null));
  assert.deepEqual(patch.toJSON(), { status: { kept: { a: 1 } } });
});

Deno.test("deliverResult() delivers nothing for failed or ignored attempts (RES-02, SUB-78)", () => {
  const patch = new Patch();
  deliverResult(patch, "fn", { kind: "temporary", error: new TemporaryError("x"), delay: 1 });
  deliverResult(patch, "fn", { kind: "permanent", error: new PermanentError("x") });
  deliverResult(patch, "fn", { kind: "ignored", error: new Error("x") });
  assert.equal(patch.isEmpty, true);
});

Deno.test("deliverResult() stores a JSON copy detached from the returned object (RES-01)", () => {
  const patch = new Patch();
  const result = { nested: { n: 1 }, when: new Date("2024-01-01T00:00:00Z"), skip: undefined };
  deliverResult(patch, "fn", success(result));
  result.nested.n = 2;
  assert.deepEqual(patch.status["fn"], {
    nested: { n: 1 },
    when: "2024-01-01T00:00:00.000Z",
  });
});

Deno.test("storageProblem(): JSON values pass; what JSON would change or refuse is named with its path", () => {
  const circular: Record<string, unknown> = { a: 1 };
  circular.self = circular;
  class Thing {
    x = 1;
  }
  const cases: Array<[unknown, string | undefined]> = [
    [{ message: "hi", n: 1.5, ok: true, none: null, list: [1, "a", { b: [] }] }, undefined],
    [{ absent: undefined }, undefined],
    [{ when: new Date(0) }, undefined],
    [Object.assign(Object.create(null), { a: 1 }), undefined],
    ["text", undefined],
    [10n, "BigInt"],
    [{ count: 10n }, "BigInt at .count"],
    [circular, "a circular reference at .self"],
    [{ m: new Map([[1, 2]]) }, "a Map at .m"],
    [{ s: new Set([1]) }, "a Set at .s"],
    [{ deep: { x: [1, NaN] } }, "NaN at .deep.x[1]"],
    [{ big: Infinity }, "Infinity at .big"],
    [{ big: -Infinity }, "-Infinity at .big"],
    [{ fn: () => 1 }, "a function at .fn"],
    [{ list: [1, undefined] }, "undefined at .list[1]"],
    [{ sym: Symbol("x") }, "a Symbol at .sym"],
    [{ "a.b": 1n }, 'BigInt at ["a.b"]'],
    [{ thing: new Thing() }, "a Thing at .thing"],
  ];
  for (const [value, problem] of cases) assert.equal(storageProblem(value), problem);
});

Deno.test("storableOutcome(): an unstorable result fails the handler permanently, with its name and the problem", () => {
  const outcome = storableOutcome("create_fn", success({ count: 10n }));
  assert.equal(outcome.kind, "permanent");
  assert.ok(outcome.kind === "permanent" && outcome.error instanceof HandlerResultError);
  assert.ok(outcome.error instanceof PermanentError);
  assert.match(
    outcome.error.message,
    /^Handler 'create_fn' returned a value that cannot be stored in status: BigInt at \.count\./,
  );
  const fine = success({ count: 10 });
  assert.equal(storableOutcome("create_fn", fine), fine);
  const failed = { kind: "temporary", error: new TemporaryError("x"), delay: 1 } as const;
  assert.equal(storableOutcome("create_fn", failed), failed);
});
