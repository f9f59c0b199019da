/**
 * Typed handlers: one type name (`on.create<KopfExample>`) or a typed resource constant
 * (`on.create(KopfExamples, …)`) types spec, status, body, patch, old/new/diff for every handler
 * kind. Proved with `deno check` on two fixtures: one must compile, the other must fail on
 * exactly its lines marked `expected error`.
 */

import assert from "node:assert/strict";
import { on, OperatorRegistry, typedResource, type TypedResourceFields } from "../mod.ts";
import { assertCompileErrors, denoCheck } from "./_typecheck.ts";

Deno.test("typed handlers: correct uses and old untyped spellings compile (X-TOOL-02)", async () => {
  const { ok, output } = await denoCheck(new URL("./types/typed_ok.ts", import.meta.url));
  assert.ok(ok, output);
});

Deno.test("typed handlers: each misuse of a typed field is a compile error (X-TOOL-02)", async () => {
  await assertCompileErrors(new URL("./types/typed_wrong.ts", import.meta.url), 19);
});

Deno.test("handler results: JSON results, results typed unknown/any, void and promises of them compile for every stored handler kind (RES-01, issue 30)", async () => {
  const { ok, output } = await denoCheck(new URL("./types/results_ok.ts", import.meta.url));
  assert.ok(ok, output);
});

Deno.test("handler results: a BigInt, Symbol, function, Map, Set or object with methods, also nested in objects and arrays, is a compile error at the handler of every stored kind (RES-01, issue 30)", async () => {
  await assertCompileErrors(new URL("./types/results_wrong.ts", import.meta.url), 29);
});

Deno.test("typed resources: the client infers the object type from the constant; the client and adopt() & co. take typed objects outside handlers (issue 30)", async () => {
  const { ok, output } = await denoCheck(new URL("./types/client_ok.ts", import.meta.url));
  assert.ok(ok, output);
});

Deno.test("typed resources: misused fields of what the client reads and writes are compile errors; the short form is for handlers only (issue 30)", async () => {
  await assertCompileErrors(new URL("./types/client_wrong.ts", import.meta.url), 8);
});

Deno.test("typedResource(): the full form is a frozen full reference, wrong fields are one TypeError, and handlers select by it without the scope (issue 30)", () => {
  const fields = {
    group: "example.com",
    version: "v1",
    plural: "widgets",
    kind: "Widget",
    namespaced: true,
  };
  const widgets = typedResource(fields);
  assert.deepEqual(widgets, fields);
  assert.ok(Object.isFrozen(widgets));
  assert.throws(
    () => typedResource({ ...fields, namespaced: "yes" } as unknown as TypedResourceFields),
    (error) => error instanceof TypeError && /check namespaced$/.test(error.message),
  );
  assert.throws(
    () => typedResource({ group: "example.com", version: "v1" } as TypedResourceFields),
    (error) => error instanceof TypeError && /check plural, kind, namespaced$/.test(error.message),
  );
  const registry = new OperatorRegistry();
  on.create(widgets, { registry }, () => {});
  assert.deepEqual(registry.registrations[0]!.selector, {
    group: "example.com",
    version: "v1",
    plural: "widgets",
    kind: "Widget",
  });
});
