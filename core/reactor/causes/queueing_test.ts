/**
 * Unit tests of the per-object queue with a fake `process` function (no API, no handlers): the
 * queue's key, one cycle at a time per object and objects side by side (bounded by a shared
 * limiter), and how events are coalesced: a burst to its latest event, with or without a batch
 * window, a new object's first event at once, behind an admission gate, and Kopf's batching.
 * @module
 */
import assert from "node:assert/strict";
import { AdmissionGate } from "../../util/gate.ts";
import { Semaphore } from "../../util/semaphore.ts";
import { objectKey } from "./queueing.ts";
import { sleep, until } from "../../util/_test_support.ts";
import { body, ev, gate, harness, rvOf } from "./_queueing_test_support.ts";

Deno.test("objectKey() uses the uid, or namespace/name without one (ARCH-13, SUB-76)", () => {
  assert.equal(objectKey(body("u1", "1")), "u1");
  assert.equal(objectKey({ metadata: { name: "n", namespace: "ns" } }), "ns/n");
  assert.equal(objectKey({ metadata: { name: "n" } }), "/n");
  assert.equal(objectKey({}), "/");
});

Deno.test("ObjectQueue processes one object's events strictly one at a time (ARCH-13, SUB-31)", async () => {
  const first = gate();
  const h = harness(async (_event, call) => {
    if (call === 1) await first.promise;
    await sleep(3);
    return {};
  });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  h.queue.push(ev("a", "2"));
  await sleep(20);
  assert.equal(h.calls.length, 1, "no second call while the first one runs");
  h.queue.push(ev("a", "3"));
  first.open();
  await until(() => h.calls.length === 2, "second call");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "3"]);
  assert.equal(h.maxPerObject, 1);
  await h.stop();
});

Deno.test("ObjectQueue processes different objects concurrently (ARCH-13, SUB-31)", async () => {
  const release = gate();
  const h = harness(async () => {
    await release.promise;
    return {};
  });
  h.queue.push(ev("a", "1"));
  h.queue.push(ev("b", "1"));
  h.queue.push(ev("c", "1"));
  await until(() => h.calls.length === 3, "all three objects to start");
  assert.equal(h.maxOverall, 3);
  assert.equal(h.queue.active, 3);
  assert.equal(h.queue.size, 3);
  release.open();
  await h.stop();
});

Deno.test("ObjectQueue bounds concurrency across objects with a shared limiter (CFG-51)", async () => {
  const h = harness(
    async () => {
      await sleep(5);
      return {};
    },
    {},
    new Semaphore(1),
  );
  for (const uid of ["a", "b", "c"]) h.queue.push(ev(uid, "1"));
  await until(() => h.calls.length === 3, "all three objects processed");
  await sleep(10);
  assert.equal(h.maxOverall, 1);
  await h.stop();
});

Deno.test("ObjectQueue coalesces a burst for an idle worker to the latest event (SUB-31, CFG-51)", async () => {
  const h = harness();
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  await sleep(10); // the worker now waits for events
  h.queue.push(ev("a", "2"));
  h.queue.push(ev("a", "3"));
  h.queue.push(ev("a", "4"));
  await until(() => h.calls.length === 2, "second call");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "4"]);
  await h.stop();
});

Deno.test("ObjectQueue without a batch window coalesces only events that arrive together (SUB-31, CFG-51)", async () => {
  const h = harness(() => ({}), { batchWindow: 0 });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  await sleep(10); // the worker now waits for events
  // Arriving in one tick (as from one chunk of a watch stream): one cycle for the latest.
  h.queue.push(ev("a", "2"));
  h.queue.push(ev("a", "3"));
  await until(() => h.calls.length === 2, "second call");
  // Arriving apart: each is processed, none waits for a window that may bring another.
  await sleep(20);
  h.queue.push(ev("a", "4"));
  await until(() => h.calls.length === 3, "third call");
  await sleep(20);
  h.queue.push(ev("a", "5"));
  await until(() => h.calls.length === 4, "fourth call");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "3", "4", "5"]);
  await h.stop();
});

Deno.test("ObjectQueue with a batch window collapses events spread over the window (CFG-51)", async () => {
  const h = harness(() => ({}), { batchWindow: 0.2 });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  await sleep(10);
  h.queue.push(ev("a", "2"));
  await sleep(20);
  h.queue.push(ev("a", "3"));
  await sleep(20);
  h.queue.push(ev("a", "4"));
  await until(() => h.calls.length === 2, "second call");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "4"]);
  await h.stop();
});

// Deliberate difference from Kopf (docs/settings.md): the event that starts a worker is
// processed at once (no batch-window delay, for low creation latency); the rest of the burst is
// coalesced to its latest event. An extra cycle costs no write when nothing essential changed.
Deno.test("ObjectQueue processes a new object's first event at once and coalesces the rest (SUB-31, CFG-51)", async () => {
  const h = harness();
  h.queue.push(ev("a", "1", "ADDED"));
  h.queue.push(ev("a", "2"));
  h.queue.push(ev("a", "3"));
  await until(() => h.calls.length >= 2, "two calls");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "3"]);
  await h.stop();
});

// The admission gate (settings.queueing.admissionLimit): admitted at once, a worker takes its
// event in the same turn; waiting for admission, events keep coalescing; a stop ends the wait.
Deno.test("ObjectQueue with an admission gate: no wait when admitted at once, coalescing while waiting, a stop ends the wait (CFG-51)", async () => {
  const admission = new AdmissionGate(1);
  const h = harness(() => ({}), {}, undefined, undefined, admission);
  h.queue.push(ev("a", "1", "ADDED"));
  h.queue.push(ev("a", "2"));
  h.queue.push(ev("a", "3"));
  await until(() => h.calls.length >= 2, "two calls");
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "3"]);
  assert.equal(admission.enter(), undefined, "the worker left the gate after each cycle");
  h.queue.push(ev("b", "1", "ADDED"));
  h.queue.push(ev("b", "2"));
  await sleep(20);
  assert.equal(h.calls.length, 2, "no cycle while the gate is full");
  h.queue.push(ev("b", "3"));
  admission.leave();
  await until(() => h.calls.length >= 3, "b admitted");
  await sleep(20);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "3", "3"]);
  assert.equal(admission.enter(), undefined);
  h.queue.push(ev("c", "1", "ADDED"));
  await sleep(20);
  await h.stop(); // the worker waiting for admission exits without processing
  assert.equal(h.calls.length, 3);
  assert.equal(admission.busy, 1, "only the test's own admission holds the gate");
});

// Kopf's batching (settings.queueing.kopfBatching): the first event waits too, and the window
// restarts with every newer event (Kopf waits for the next event with the window as timeout).
Deno.test("ObjectQueue with kopfBatching holds a new object's first event for the window and processes the burst's latest (CFG-51)", async () => {
  const h = harness(() => ({}), { kopfBatching: true, batchWindow: 0.3 });
  h.queue.push(ev("a", "1", "ADDED"));
  await sleep(30);
  h.queue.push(ev("a", "2"));
  await sleep(30);
  h.queue.push(ev("a", "3"));
  await until(() => h.calls.length >= 1, "first call");
  await sleep(30);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["3"]);
  await h.stop();
});

Deno.test("ObjectQueue with kopfBatching restarts the window with every newer event (CFG-51)", async () => {
  const h = harness(() => ({}), { kopfBatching: true, batchWindow: 0.3 });
  h.queue.push(ev("a", "1", "ADDED"));
  // Eight events 50 ms apart: 400 ms in all, longer than one window, never a window's pause.
  for (let rv = 2; rv <= 9; rv++) {
    await sleep(50);
    h.queue.push(ev("a", String(rv)));
  }
  await until(() => h.calls.length >= 1, "first call");
  await sleep(30);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["9"]);
  await h.stop();
});
