/**
 * Unit tests of the per-object queue's workers and memories, with a fake `process` function (no
 * API, no handlers): workers exiting when idle (keeping the memory, or dropping a forgettable
 * one, and leaving no listener behind), objects forgotten after DELETED, the stop and `drain()`,
 * the objects waiting for their first cycle (`unbegun`, `room()`), and the bodies idle workers
 * hold.
 * @module
 */
import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import { createSettings } from "../../settings/settings.ts";
import { AdmissionGate } from "../../util/gate.ts";
import type { CycleResult, ObjectMemory } from "./processing.ts";
import { objectKey, ObjectQueue } from "./queueing.ts";
import { sleep, until } from "../../util/_test_support.ts";
import { ev, harness } from "./_queueing_test_support.ts";

Deno.test("ObjectQueue workers exit after idleTimeout; the memory stays (SUB-31, CFG-51)", async () => {
  const h = harness();
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "first call");
  assert.equal(h.queue.active, 1);
  await until(() => h.queue.active === 0, "the idle worker to exit");
  assert.equal(h.queue.size, 1);
  h.queue.push(ev("a", "2"));
  await until(() => h.calls.length === 2, "a new worker");
  assert.equal(h.memos.length, 1, "the memory is created once");
  assert.equal(h.calls[0]!.memory, h.calls[1]!.memory);
  await h.stop();
});

Deno.test("ObjectQueue drops a memory its deps call forgettable once the worker exits idle; a new event makes it anew (SUB-31)", async () => {
  const h = harness(
    (event, call) => {
      if (objectKey(event.body) === "a" && call === 1) h.calls[0]!.memory.memo["kept"] = true;
      return {};
    },
    {},
    undefined,
    (memory) => !memory.memo["kept"],
  );
  h.queue.push(ev("a", "1"));
  await until(() => h.calls.length === 1, "a processed");
  h.queue.push(ev("b", "1"));
  await until(() => h.calls.length === 2 && h.queue.active === 0, "both workers to exit");
  assert.ok(h.queue.memory("a"), "a's memo holds something: kept");
  assert.equal(h.queue.memory("b"), undefined, "b's memory holds nothing: dropped");
  assert.equal(h.queue.size, 1);
  h.queue.push(ev("b", "2"));
  h.queue.push(ev("a", "2"));
  await until(() => h.calls.length === 4, "both processed again");
  const later = (key: string) => h.calls.find((c, i) => i > 1 && c.key === key)!.memory;
  assert.notEqual(later("b"), h.calls[1]!.memory, "b: a new memory");
  assert.equal(later("a"), h.calls[0]!.memory, "a: the same memory");
  assert.equal(h.memos.length, 3, "a new memory (and memo) for b only");
  await h.stop();
});

// Regression: an idle worker that timed out left its wake-up listener on the operator's signal,
// keeping the worker and its timer alive for as long as the operator ran (found in a heap
// snapshot: one ObjectWorker per object ever processed).
Deno.test("ObjectQueue workers that exit when idle leave no listener on the signal (SUB-31)", async () => {
  const h = harness();
  for (const uid of ["a", "b", "c", "d"]) h.queue.push(ev(uid, "1"));
  await until(() => h.calls.length === 4, "all processed");
  await until(() => h.queue.active === 0, "the idle workers to exit");
  assert.equal(h.listeners.size, h.baseListeners);
  h.queue.push(ev("a", "2"));
  await until(() => h.calls.length === 5, "a new worker");
  await until(() => h.queue.active === 0, "it to exit again");
  assert.equal(h.listeners.size, h.baseListeners);
  await h.stop();
});

Deno.test("ObjectQueue forgets an object that starts a worker with DELETED (SUB-31)", async () => {
  const h = harness();
  h.queue.push(ev("a", "1"));
  await until(() => h.queue.active === 0 && h.calls.length === 1, "the idle worker to exit");
  assert.equal(h.queue.size, 1);
  h.queue.push(ev("a", "2", "DELETED"));
  await until(() => h.calls.length === 2, "DELETED processed");
  await until(() => h.queue.active === 0, "the worker to exit");
  assert.equal(h.queue.size, 0);
  await h.stop();
});

// Regression: the memory of an object is released after its DELETED event (no leak).
Deno.test({
  name: "ObjectQueue forgets an object after a DELETED event to a live worker (SUB-31)",
  async fn() {
    const h = harness();
    h.queue.push(ev("a", "1"));
    await until(() => h.calls.length === 1, "first call");
    assert.equal(h.queue.active, 1);
    h.queue.push(ev("a", "2", "DELETED"));
    await until(() => h.calls.length === 2, "DELETED processed");
    await until(() => h.queue.active === 0, "the worker to exit");
    assert.equal(h.queue.size, 0);
    await h.stop();
  },
});

Deno.test("ObjectQueue stops its workers when the signal aborts (SUB-74)", async () => {
  const h = harness(() => ({ delay: 10 }));
  h.queue.push(ev("a", "1"));
  h.queue.push(ev("b", "1"));
  await until(() => h.calls.length === 2, "both objects");
  assert.equal(h.queue.active, 2);
  await h.stop();
  assert.equal(h.queue.active, 0);
  h.queue.push(ev("c", "1"));
  await sleep(10);
  assert.equal(h.calls.length, 2, "nothing is processed after the stop");
});

// Regression: drain() leaves no timer armed once the workers are done.
Deno.test({
  name: "ObjectQueue.drain() leaves no timer behind once the workers are done (CFG-51)",
  async fn() {
    const h = harness();
    h.queue.push(ev("a", "1"));
    await until(() => h.calls.length === 1, "first call");
    await h.stop();
    type Timers = {
      setTimeout: (fn: () => void, ms?: number) => unknown;
      clearTimeout: (id?: unknown) => void;
    };
    const timers = globalThis as unknown as Timers;
    const armed = new Set<unknown>();
    const realSet = timers.setTimeout;
    const realClear = timers.clearTimeout;
    timers.setTimeout = (fn, ms) => {
      const id = realSet.call(globalThis, () => {
        armed.delete(id);
        fn();
      }, ms);
      armed.add(id);
      return id;
    };
    timers.clearTimeout = (id) => {
      armed.delete(id);
      realClear.call(globalThis, id);
    };
    try {
      await h.queue.drain(5);
      assert.equal(armed.size, 0, "drain() left a timer armed");
    } finally {
      timers.setTimeout = realSet;
      timers.clearTimeout = realClear;
      for (const id of armed) realClear.call(globalThis, id);
    }
  },
});

Deno.test("unbegun and room(): objects waiting for their first cycle, and waiting until half as many do", async () => {
  // One cycle at a time, held until released: the other objects wait for their first cycle.
  const releases: (() => void)[] = [];
  const h = harness(
    () => new Promise<CycleResult>((resolve) => releases.push(() => resolve({}))),
    {},
    undefined,
    undefined,
    new AdmissionGate(1),
  );
  for (let i = 0; i < 6; i++) h.queue.push(ev(`u${i}`, "1", "ADDED"));
  await until(() => releases.length === 1, "the first cycle");
  assert.equal(h.queue.unbegun, 5); // the first one began
  const signal = new AbortController().signal;
  assert.equal(h.queue.room(6, signal), undefined); // fewer than 6 wait: room at once
  let roomy = false;
  const room = h.queue.room(4, signal)!.then(() => roomy = true);
  // 5 wait; room comes when fewer than 2 (half of 4) wait: after four more cycles began.
  for (let begun = 1; begun <= 3; begun++) {
    releases[begun - 1]!();
    await until(() => releases.length === begun + 1, `cycle ${begun + 1}`);
    assert.equal(roomy, false, `no room with ${h.queue.unbegun} waiting`);
  }
  releases[3]!();
  await room;
  assert.equal(h.queue.unbegun, 1);
  // A wait ends with its signal too.
  const stopper = new AbortController();
  const waiting = h.queue.room(1, stopper.signal)!;
  stopper.abort();
  await waiting;
  for (const release of releases.slice(4)) release();
  releases.splice(0).forEach((release) => release());
  while (h.queue.unbegun) {
    await sleep(5);
    releases.splice(0).forEach((release) => release());
  }
  await h.stop();
  assert.equal(h.queue.unbegun, 0);
});

Deno.test("ObjectQueue: an idle worker with nothing due and nothing to wake it holds no body; one with a delay or daemons keeps its last", async () => {
  const controller = new AbortController();
  const settings = createSettings({ queueing: { idleTimeout: 30 } }).queueing;
  const done = new Set<string>();
  const queue = new ObjectQueue({
    settings,
    logger: new Logger(["kopf", "test"]),
    signal: controller.signal,
    limiter: undefined,
    gate: undefined,
    observer: undefined,
    createMemo: () => ({}),
    process: (memory, event) => {
      const uid = event.body.metadata?.uid ?? "";
      // "d": daemons (a spawner, which may wake the object); "t": a handler due in 60 s.
      if (uid === "d") memory.spawner = {} as NonNullable<ObjectMemory["spawner"]>;
      done.add(uid);
      return Promise.resolve(uid === "t" ? { delay: 60 } : {});
    },
  });
  try {
    for (const uid of ["a", "b", "c"]) queue.push(ev(uid, "1"));
    await until(() => done.size === 3, "three cycles");
    await sleep(20); // the workers wait, idle (for 30 s)
    assert.equal(queue.heldBodies, 0, "idle workers hold no bodies");
    queue.push(ev("d", "1"));
    queue.push(ev("t", "1"));
    await until(() => done.has("d") && done.has("t"), "the cycles of d and t");
    await sleep(20);
    assert.equal(
      queue.heldBodies,
      2,
      "the worker with daemons and the one with a delay keep theirs",
    );
  } finally {
    controller.abort();
  }
});
