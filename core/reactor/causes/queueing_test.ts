// Unit tests of the per-object queue with a fake `process` function (no API, no handlers).
import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import { createSettings, type QueueingSettings } from "../../settings/settings.ts";
import type { Memo } from "../../intents/contexts.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { AdmissionGate } from "../../util/gate.ts";
import { Semaphore } from "../../util/semaphore.ts";
import type { CycleResult, ObjectEvent, ObjectMemory } from "./processing.ts";
import { objectKey, ObjectQueue } from "./queueing.ts";
import { sleep, until } from "../../util/_test_support.ts";

type EventType = ObjectEvent["type"];

function body(uid: string, rv: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { uid, name: `name-${uid}`, namespace: "ns", resourceVersion: rv },
    spec,
  } as KubeObject;
}

function ev(uid: string, rv: string, type: EventType = "MODIFIED"): ObjectEvent {
  return { type, body: body(uid, rv) };
}

const rvOf = (event: ObjectEvent) => event.body.metadata?.resourceVersion;

interface Call {
  readonly key: string;
  readonly event: ObjectEvent;
  readonly memory: ObjectMemory;
  readonly at: number;
}

/** A queue with a fake `process`; `handle` decides what each call does. */
function harness(
  handle: (event: ObjectEvent, call: number) => Promise<CycleResult> | CycleResult = () => ({}),
  queueing: Partial<QueueingSettings> = {},
  limiter?: Semaphore,
  forgettable?: (memory: ObjectMemory) => boolean,
  admission?: AdmissionGate,
) {
  const controller = new AbortController();
  const listeners = trackAbortListeners(controller.signal);
  const settings = createSettings({
    queueing: { batchWindow: 0.005, idleTimeout: 0.05, errorDelays: [0.03, 0.06], ...queueing },
  }).queueing;
  const calls: Call[] = [];
  const logs: LogEntry[] = [];
  const memos: Memo[] = [];
  const running = new Map<string, number>();
  let maxPerObject = 0;
  let maxOverall = 0;
  const queue = new ObjectQueue({
    settings,
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    signal: controller.signal,
    limiter,
    forgettable,
    gate: admission,
    createMemo: () => {
      const memo = {};
      memos.push(memo);
      return memo;
    },
    process: async (memory, event) => {
      const key = objectKey(event.body);
      calls.push({ key, event, memory, at: performance.now() });
      running.set(key, (running.get(key) ?? 0) + 1);
      maxPerObject = Math.max(maxPerObject, running.get(key)!);
      maxOverall = Math.max(maxOverall, [...running.values()].reduce((a, b) => a + b, 0));
      try {
        return await handle(event, calls.length);
      } finally {
        running.set(key, running.get(key)! - 1);
      }
    },
  });
  const baseListeners = listeners.size; // the queue's own, one for all its workers
  const stop = async () => {
    controller.abort();
    await until(() => queue.active === 0, "workers to exit");
  };
  return {
    queue,
    calls,
    logs,
    memos,
    stop,
    listeners,
    baseListeners,
    get maxPerObject() {
      return maxPerObject;
    },
    get maxOverall() {
      return maxOverall;
    },
  };
}

/** Keeps count of the "abort" listeners currently registered on a signal. */
function trackAbortListeners(signal: AbortSignal): Set<unknown> {
  const live = new Set<unknown>();
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((type: string, listener: EventListener, options?: unknown) => {
    if (type === "abort") live.add(listener);
    add(type, listener, options as AddEventListenerOptions);
  }) as typeof signal.addEventListener;
  signal.removeEventListener = ((type: string, listener: EventListener, options?: unknown) => {
    if (type === "abort") live.delete(listener);
    remove(type, listener, options as EventListenerOptions);
  }) as typeof signal.removeEventListener;
  return live;
}

function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

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
