/**
 * Unit tests of the per-object queue between cycles, with a fake `process` function (no API, no
 * handlers): the echo of its own write and older versions skipped (one look at its own write
 * unless the cycle says it is settled), DELETED never skipped, re-processing after the delay a
 * cycle returns (or at once, or earlier for a new event), and retries after unexpected errors
 * throttled by `errorDelays`.
 * @module
 */
import assert from "node:assert/strict";
import { sleep, until } from "../../util/_test_support.ts";
import { body, ev, gate, harness, rvOf } from "./_queueing_test_support.ts";

Deno.test("ObjectQueue skips the echo of its own write and older versions (SUB-31)", async () => {
  const h = harness((event) =>
    rvOf(event) === "4" ? { body: body("a", "5", { patched: true }) } : {}
  );
  h.queue.push(ev("a", "4"));
  // After a write, the stored object is looked at once (it may hold someone else's change).
  await until(() => h.calls.length === 2, "first call and the look at its own write");
  assert.equal(rvOf(h.calls[1]!.event), "5");
  await sleep(10);
  h.queue.push(ev("a", "5")); // the echo of the patch made by the first cycle
  await sleep(20);
  h.queue.push(ev("a", "3")); // an older, stale event
  await sleep(20);
  assert.equal(h.calls.length, 2, "echoed and stale events are skipped");
  h.queue.push(ev("a", "6"));
  await until(() => h.calls.length === 3, "newer event processed");
  assert.equal(rvOf(h.calls[2]!.event), "6");
  await h.stop();
});

Deno.test("ObjectQueue takes no second look at its own write when the cycle says it is settled", async () => {
  const h = harness((event) =>
    rvOf(event) === "4" ? { body: body("a", "5", { patched: true }), settled: true } : {}
  );
  h.queue.push(ev("a", "4"));
  await until(() => h.calls.length === 1, "the first call");
  await sleep(30);
  assert.equal(h.calls.length, 1, "nothing else to look at");
  h.queue.push(ev("a", "5")); // the echo of its own write: still skipped
  await sleep(20);
  assert.equal(h.calls.length, 1);
  h.queue.push(ev("a", "6"));
  await until(() => h.calls.length === 2, "a newer event is processed");
  await h.stop();
});

Deno.test("ObjectQueue compares non-numeric resourceVersions by equality only (SUB-31)", async () => {
  const h = harness((event) => rvOf(event) === "x1" ? { body: body("a", "x2") } : {});
  h.queue.push(ev("a", "x1"));
  await until(() => h.calls.length === 2, "first call and the look at its own write");
  await sleep(10);
  h.queue.push(ev("a", "x2"));
  await sleep(20);
  assert.equal(h.calls.length, 2, "the equal version is skipped");
  h.queue.push(ev("a", "x0"));
  await until(() => h.calls.length === 3, "an unordered version is processed");
  await h.stop();
});

Deno.test("ObjectQueue never skips a DELETED event, even with a known version (SUB-31)", async () => {
  const h = harness((event) => rvOf(event) === "4" ? { body: body("a", "5") } : {});
  h.queue.push(ev("a", "4"));
  await until(() => h.calls.length === 2, "first call and the look at its own write");
  await sleep(10);
  h.queue.push(ev("a", "5", "DELETED"));
  await until(() => h.calls.length === 3, "DELETED processed");
  assert.equal(h.calls[2]!.event.type, "DELETED");
  await h.stop();
});

Deno.test("ObjectQueue re-processes after the returned delay without new events (SUB-05)", async () => {
  // Cycle 1 writes and has a handler due in 20 ms; cycle 2 (the look at its own write) finds it
  // still delayed; cycle 3 runs when it is due, without any new event.
  const h = harness((_event, call) =>
    call === 1
      ? { body: body("a", "2", { written: true }), delay: 0.02 }
      : call === 2
      ? { delay: 0.02 }
      : {}
  );
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 3, "the delayed re-processing");
  const [, second, third] = h.calls;
  assert.ok(third!.at - second!.at >= 15, `re-processed after ${third!.at - second!.at}ms`);
  // The re-processing continues from the object as stored by the previous cycle.
  assert.equal(third!.event.type, "MODIFIED");
  assert.equal(rvOf(third!.event), "2");
  assert.deepEqual(third!.event.body.spec, { written: true });
  await sleep(30);
  assert.equal(h.calls.length, 3, "no more cycles once nothing is delayed");
  await h.stop();
});

Deno.test("ObjectQueue re-processes at once for a zero delay (SUB-32)", async () => {
  const h = harness((_event, call) => (call < 3 ? { delay: 0 } : {}));
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 3, "three cycles");
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "1", "1"]);
  await sleep(20);
  assert.equal(h.calls.length, 3);
  await h.stop();
});

Deno.test("ObjectQueue lets a new event interrupt a pending delay (SUB-05)", async () => {
  const h = harness((_event, call) => (call === 1 ? { delay: 10 } : {}));
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  await sleep(10);
  h.queue.push(ev("a", "2"));
  await until(() => h.calls.length === 2, "the new event");
  assert.equal(rvOf(h.calls[1]!.event), "2");
  await h.stop();
});

Deno.test("ObjectQueue throttles retries after unexpected errors with errorDelays (SUB-42, CFG-50)", async () => {
  const h = harness((_event, call) => {
    if (call <= 2) throw new Error(`boom ${call}`);
    return {};
  });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 3, "two retries");
  const [c1, c2, c3] = h.calls;
  assert.ok(c2!.at - c1!.at >= 25, `first retry after ${c2!.at - c1!.at}ms, expected ~30ms`);
  assert.ok(c3!.at - c2!.at >= 50, `second retry after ${c3!.at - c2!.at}ms, expected ~60ms`);
  assert.deepEqual(h.calls.map((c) => rvOf(c.event)), ["1", "1", "1"]);
  const errors = h.logs.filter((e) => e.level === "error");
  assert.deepEqual(errors.map((e) => e.message), [
    "Unexpected error while processing; retrying in 0.03s.",
    "Unexpected error while processing; retrying in 0.06s.",
  ]);
  assert.equal(errors[0]!.local, true, "throttling messages are not posted as Events");
  assert.equal(errors[0]!.object?.uid, "a");
  assert.equal((errors[1]!.error as Error).message, "boom 2");
  await h.stop();
});

Deno.test("ObjectQueue repeats the last errorDelays value (CFG-50)", async () => {
  const h = harness((_event, call) => {
    if (call <= 3) throw new Error("boom");
    return {};
  }, { errorDelays: [0.001, 0.01] });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 4, "three retries");
  assert.deepEqual(
    h.logs.filter((e) => e.level === "error").map((e) => e.message.match(/in ([\d.]+)s/)![1]),
    ["0.001", "0.01", "0.01"],
  );
  await h.stop();
});

Deno.test("ObjectQueue retries the latest event after an error (SUB-42)", async () => {
  const failing = gate();
  const h = harness(async (_event, call) => {
    if (call === 1) {
      await failing.promise;
      throw new Error("boom");
    }
    return {};
  }, { errorDelays: [0.01] });
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  h.queue.push(ev("a", "2"));
  failing.open();
  await until(() => h.calls.length === 2, "the retry");
  assert.equal(rvOf(h.calls[1]!.event), "2");
  await h.stop();
});
