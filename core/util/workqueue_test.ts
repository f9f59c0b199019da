import assert from "node:assert/strict";
import { type QueueClock, WorkQueue } from "./workqueue.ts";

/** A manual clock: timers fire only when the test advances time. */
class ManualClock implements QueueClock {
  #now = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  now(): number {
    return this.#now;
  }
  set(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { at: this.#now + ms, fn });
    return id;
  }
  clear(handle: unknown): void {
    this.#timers.delete(handle as number);
  }
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      const due = [...this.#timers.entries()].filter(([, t]) => t.at <= until)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.#now = due[1].at;
      due[1].fn();
    }
    this.#now = until;
  }
  get pending(): number {
    return this.#timers.size;
  }
}

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

Deno.test("WorkQueue.add() deduplicates a key while it waits", async () => {
  const queue = new WorkQueue<string>();
  queue.add("a");
  queue.add("b");
  queue.add("a");
  assert.equal(queue.length, 2);
  assert.equal(await queue.get(), "a");
  assert.equal(await queue.get(), "b");
  assert.equal(queue.length, 0);
});

Deno.test("WorkQueue never hands out a key that is being processed; it re-queues it after done()", async () => {
  const queue = new WorkQueue<string>();
  queue.add("a");
  const key = await queue.get();
  assert.equal(key, "a");
  queue.add("a");
  queue.add("a");
  assert.equal(queue.length, 0, "not ready while processed");
  const next = queue.get();
  let got: string | undefined = "pending";
  next.then((k) => got = k);
  await tick();
  assert.equal(got, "pending");
  queue.done("a");
  await tick();
  assert.equal(got, "a", "queued once again after done()");
  queue.done("a");
  assert.equal(queue.length, 0);
});

Deno.test("WorkQueue.addAfter() delays a key; the earliest due time wins", async () => {
  const clock = new ManualClock();
  const queue = new WorkQueue<string>({ clock });
  queue.addAfter("a", 1000);
  queue.addAfter("a", 300);
  queue.addAfter("a", 5000);
  assert.equal(clock.pending, 1);
  clock.advance(299);
  assert.equal(await queue.get(AbortSignal.abort()), undefined);
  clock.advance(1);
  assert.equal(await queue.get(), "a");
  queue.done("a");
  clock.advance(10_000);
  assert.equal(queue.length, 0, "the later due times were dropped");
});

Deno.test("WorkQueue.add() makes a delayed key ready at once", async () => {
  const clock = new ManualClock();
  const queue = new WorkQueue<string>({ clock });
  queue.addAfter("a", 1000);
  queue.add("a");
  assert.equal(clock.pending, 0);
  assert.equal(await queue.get(), "a");
});

Deno.test("WorkQueue.addRateLimited() backs off per key exponentially from 5 ms to 1,000 s, reset by forget()", () => {
  const queue = new WorkQueue<string>({ clock: new ManualClock(), burst: 1e9, qps: 1e9 });
  const delays = Array.from({ length: 30 }, () => queue.nextDelay("a"));
  assert.deepEqual(delays.slice(0, 5), [5, 10, 20, 40, 80]);
  assert.equal(delays.at(-1), 1_000_000);
  assert.equal(Math.max(...delays), 1_000_000);
  assert.equal(queue.nextDelay("b"), 5, "per key");
  assert.equal(queue.retries("a"), 30);
  queue.forget("a");
  assert.equal(queue.nextDelay("a"), 5);
});

Deno.test("WorkQueue.addRateLimited() is also limited overall by a token bucket", () => {
  const clock = new ManualClock();
  const queue = new WorkQueue<number>({ clock, qps: 10, burst: 3 });
  const delays = Array.from({ length: 5 }, (_, i) => queue.addRateLimited(i));
  assert.deepEqual(delays, [5, 5, 5, 100, 200]);
  clock.advance(1000);
  assert.equal(queue.addRateLimited(99), 5, "refilled");
});

Deno.test("WorkQueue.run() bounds concurrency and never runs one key twice at once", async () => {
  const queue = new WorkQueue<string>();
  const stop = new AbortController();
  let running = 0;
  let peak = 0;
  const active = new Set<string>();
  const runs: string[] = [];
  const gates: Array<() => void> = [];
  const done = queue.run(async (key) => {
    assert.ok(!active.has(key), `key ${key} twice at once`);
    active.add(key);
    peak = Math.max(peak, ++running);
    runs.push(key);
    await new Promise<void>((resolve) => gates.push(resolve));
    running--;
    active.delete(key);
  }, { concurrency: 2, signal: stop.signal });
  for (const key of ["a", "b", "c", "a", "a"]) queue.add(key);
  await tick();
  assert.deepEqual(runs, ["a", "b"]);
  queue.add("a"); // while a runs
  gates.shift()!(); // a finishes → c or a
  await tick();
  gates.shift()!();
  await tick();
  while (gates.length) {
    gates.shift()!();
    await tick();
  }
  assert.equal(peak, 2);
  assert.deepEqual(runs.toSorted(), ["a", "a", "b", "c"]);
  stop.abort();
  await done;
});

Deno.test("WorkQueue.run() retries a failing key with backoff and stops cleanly", async () => {
  const clock = new ManualClock();
  const queue = new WorkQueue<string>({ clock });
  const stop = new AbortController();
  let attempts = 0;
  const done = queue.run(() => {
    attempts++;
    return Promise.reject(new Error("boom"));
  }, { signal: stop.signal });
  queue.add("a");
  await tick();
  assert.equal(attempts, 1);
  clock.advance(4);
  await tick();
  assert.equal(attempts, 1);
  clock.advance(1);
  await tick();
  assert.equal(attempts, 2, "after 5 ms");
  clock.advance(10);
  await tick();
  assert.equal(attempts, 3, "after 10 ms more");
  stop.abort();
  await done;
  assert.equal(clock.pending, 0, "the delayed retry was dropped");
});

Deno.test("WorkQueue.run() drains: in-flight keys finish, queued ones do not start, late adds are ignored", async () => {
  const queue = new WorkQueue<string>();
  const stop = new AbortController();
  const started: string[] = [];
  let release!: () => void;
  const done = queue.run(async (key) => {
    started.push(key);
    if (key === "a") await new Promise<void>((resolve) => release = resolve);
  }, { signal: stop.signal, graceMs: 10_000 });
  queue.add("a");
  queue.add("b");
  await tick();
  stop.abort();
  queue.add("c");
  let finished = false;
  done.then(() => finished = true);
  await tick();
  assert.equal(finished, false, "waits for the key in flight");
  release();
  await done;
  assert.deepEqual(started, ["a"]);
});

Deno.test("WorkQueue.run() aborts the workers' signal after the grace period", async () => {
  const queue = new WorkQueue<string>();
  const stop = new AbortController();
  let aborted = false;
  const done = queue.run(async (_key, signal) => {
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    aborted = signal.aborted;
  }, { signal: stop.signal, graceMs: 1 });
  queue.add("a");
  await tick();
  stop.abort();
  await done;
  assert.equal(aborted, true);
});

Deno.test("WorkQueue rejects bad options with a RangeError naming the option", () => {
  assert.throws(() => new WorkQueue({ baseDelayMs: 0 }), /baseDelayMs/);
  assert.throws(() => new WorkQueue({ qps: -1 }), /qps/);
});
