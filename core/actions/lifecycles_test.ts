import assert from "node:assert/strict";
import {
  allAtOnce,
  asap,
  getDefaultLifecycle,
  type Lifecycle,
  type LifecycleCandidate,
  oneByOne,
  randomized,
  setDefaultLifecycle,
  shuffled,
} from "./lifecycles.ts";

const A = { id: "a", retries: 2 };
const B = { id: "b", retries: 0 };
const C = { id: "c", retries: 1 };
const D = { id: "d", retries: 0 };
const ALL: readonly LifecycleCandidate[] = [A, B, C, D];

const idsOf = (handlers: readonly LifecycleCandidate[]) => handlers.map((h) => h.id);

Deno.test("asap() picks the handler with the fewest retries (REG-10, SUB-32)", () => {
  assert.deepEqual(asap([A, C, B]), [B]);
  assert.deepEqual(asap([A, C]), [C]);
});

Deno.test("asap() breaks ties by registration order (REG-10, SUB-32)", () => {
  assert.deepEqual(asap(ALL), [B]);
  assert.deepEqual(asap([D, B]), [D]);
  assert.deepEqual(asap([{ id: "x", retries: 3 }, { id: "y", retries: 3 }]), [
    { id: "x", retries: 3 },
  ]);
});

Deno.test("asap() returns nothing for no handlers (REG-10)", () => {
  assert.deepEqual(asap([]), []);
});

Deno.test("asap() keeps the extra fields of the candidates (REG-10)", () => {
  const handler = { id: "h", retries: 0, handler: "payload" };
  assert.equal(asap([handler])[0], handler);
});

Deno.test("oneByOne() runs only the first due handler regardless of retries (REG-10)", () => {
  assert.deepEqual(oneByOne(ALL), [A]);
  assert.deepEqual(oneByOne([]), []);
});

Deno.test("allAtOnce() runs every due handler in registration order (REG-10)", () => {
  assert.deepEqual(idsOf(allAtOnce(ALL)), ["a", "b", "c", "d"]);
  assert.deepEqual(allAtOnce([]), []);
});

Deno.test("shuffled() runs every due handler exactly once, without changing the input (REG-10)", () => {
  const input = [...ALL];
  const seenOrders = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const result = shuffled(input);
    assert.notEqual(result, input);
    assert.equal(result.length, ALL.length);
    assert.deepEqual(new Set(result), new Set(ALL));
    seenOrders.add(idsOf(result).join(""));
  }
  assert.deepEqual(input, ALL);
  assert.ok(seenOrders.size > 1, "the order should vary between calls");
});

Deno.test("randomized() runs exactly one of the due handlers (REG-10)", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const result = randomized(ALL);
    assert.equal(result.length, 1);
    assert.ok(ALL.includes(result[0]!));
    seen.add(result[0]!.id);
  }
  assert.ok(seen.size > 1, "the choice should vary between calls");
  assert.deepEqual(randomized([]), []);
});

Deno.test("getDefaultLifecycle()/setDefaultLifecycle() replace and restore the default (REG-10)", () => {
  assert.equal(getDefaultLifecycle(), asap);
  try {
    setDefaultLifecycle(allAtOnce as Lifecycle);
    assert.equal(getDefaultLifecycle(), allAtOnce);
    assert.deepEqual(idsOf(getDefaultLifecycle()(ALL)), ["a", "b", "c", "d"]);
    setDefaultLifecycle(undefined);
    assert.equal(getDefaultLifecycle(), asap);
  } finally {
    setDefaultLifecycle(undefined);
  }
});
