import assert from "node:assert/strict";
import { handledObject, withHandledObject } from "./handled_object.ts";

Deno.test("handledObject() is the object of the enclosing withHandledObject(), across awaits (HIER-10)", async () => {
  assert.equal(handledObject(), undefined, "nothing outside handlers");
  const a = { metadata: { name: "a" } };
  const b = { metadata: { name: "b" } };
  const seen: unknown[] = [];
  await Promise.all([
    withHandledObject({ body: a }, async () => {
      await new Promise((r) => setTimeout(r, 5));
      seen.push(handledObject());
    }),
    withHandledObject({ body: b }, async () => {
      seen.push(handledObject());
      await withHandledObject({ body: a }, () => seen.push(handledObject()));
      seen.push(handledObject());
    }),
  ]);
  assert.deepEqual(seen, [b, a, b, a]);
  assert.equal(handledObject(), undefined, "nothing after the handlers");
});

Deno.test("withHandledObject() reads live bodies through the holder's getter (HIER-10)", () => {
  let body = { metadata: { name: "v1" } };
  const holder = {
    get body() {
      return body;
    },
  };
  withHandledObject(holder, () => {
    body = { metadata: { name: "v2" } };
    assert.equal(handledObject()?.metadata?.name, "v2");
  });
});
