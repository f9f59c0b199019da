import assert from "node:assert/strict";
import { Semaphore } from "./semaphore.ts";

/** Lets pending promise callbacks run. */
const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

function track(
  promise: Promise<void>,
): { state: "pending" | "resolved" | "rejected"; reason?: unknown } {
  const result: { state: "pending" | "resolved" | "rejected"; reason?: unknown } = {
    state: "pending",
  };
  promise.then(
    () => (result.state = "resolved"),
    (reason) => {
      result.state = "rejected";
      result.reason = reason;
    },
  );
  return result;
}

Deno.test("Semaphore grants up to its limit at once and blocks the next one (CFG-51, SUB-31)", async () => {
  const semaphore = new Semaphore(2);
  const a = track(semaphore.acquire());
  const b = track(semaphore.acquire());
  const c = track(semaphore.acquire());
  await tick();
  assert.deepEqual([a.state, b.state, c.state], ["resolved", "resolved", "pending"]);
  semaphore.release();
  await tick();
  assert.equal(c.state, "resolved");
});

Deno.test("Semaphore bounds the number of concurrent holders (SUB-31)", async () => {
  const semaphore = new Semaphore(3);
  let running = 0;
  let peak = 0;
  const work = async (i: number) => {
    await semaphore.acquire();
    try {
      running++;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setTimeout(resolve, i % 3));
    } finally {
      running--;
      semaphore.release();
    }
  };
  await Promise.all(Array.from({ length: 20 }, (_, i) => work(i)));
  assert.equal(peak, 3);
  assert.equal(running, 0);
});

Deno.test("Semaphore hands freed slots to waiters in FIFO order (SUB-31)", async () => {
  const semaphore = new Semaphore(1);
  await semaphore.acquire();
  const order: number[] = [];
  const waiters = [1, 2, 3].map((n) => semaphore.acquire().then(() => order.push(n)));
  await tick();
  assert.deepEqual(order, []);
  semaphore.release();
  await tick();
  assert.deepEqual(order, [1]);
  semaphore.release();
  semaphore.release();
  await Promise.all(waiters);
  assert.deepEqual(order, [1, 2, 3]);
});

Deno.test("Semaphore rejects an aborted wait with the signal's reason and skips it (SUB-31)", async () => {
  const semaphore = new Semaphore(1);
  await semaphore.acquire();
  const controller = new AbortController();
  const aborted = track(semaphore.acquire(controller.signal));
  const next = track(semaphore.acquire());
  await tick();
  const reason = new Error("stop");
  controller.abort(reason);
  await tick();
  assert.equal(aborted.state, "rejected");
  assert.equal(aborted.reason, reason);
  assert.equal(next.state, "pending");
  semaphore.release();
  await tick();
  assert.equal(next.state, "resolved");
  // The aborted waiter took no slot: after the last holder releases, one slot is free.
  semaphore.release();
  const again = track(semaphore.acquire());
  await tick();
  assert.equal(again.state, "resolved");
});

Deno.test("Semaphore rejects at once for an already aborted signal, even with free slots (SUB-31)", async () => {
  const semaphore = new Semaphore(1);
  const controller = new AbortController();
  controller.abort(new Error("already"));
  const rejected = track(semaphore.acquire(controller.signal));
  await tick();
  assert.equal(rejected.state, "rejected");
  assert.equal((rejected.reason as Error).message, "already");
  const ok = track(semaphore.acquire());
  await tick();
  assert.equal(ok.state, "resolved", "the rejected acquisition must not take the only slot");
});

Deno.test("Semaphore ignores an abort after the slot was granted (SUB-31)", async () => {
  const semaphore = new Semaphore(1);
  await semaphore.acquire();
  const controller = new AbortController();
  const granted = track(semaphore.acquire(controller.signal));
  semaphore.release();
  await tick();
  assert.equal(granted.state, "resolved");
  controller.abort();
  await tick();
  assert.equal(granted.state, "resolved");
  const blocked = track(semaphore.acquire());
  await tick();
  assert.equal(blocked.state, "pending", "the slot is still held by the granted waiter");
  semaphore.release();
  await tick();
  assert.equal(blocked.state, "resolved");
});

Deno.test("Semaphore treats limits below 1 as 1 (SUB-31)", async () => {
  const semaphore = new Semaphore(0);
  const a = track(semaphore.acquire());
  const b = track(semaphore.acquire());
  await tick();
  assert.deepEqual([a.state, b.state], ["resolved", "pending"]);
  semaphore.release();
  await tick();
  assert.equal(b.state, "resolved");
});
