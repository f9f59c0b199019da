import assert from "node:assert/strict";
import { RequestThrottle } from "./throttle.ts";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A clock that moves only when the test says so. */
function manualClock() {
  let ms = 1_000;
  return { now: () => ms, advance: (by: number) => void (ms += by) };
}

/** A wait with a flag telling whether it is over yet. */
function track(wait: Promise<void>) {
  const tracked = { done: false, promise: wait };
  wait.then(() => tracked.done = true, () => tracked.done = true);
  return tracked;
}

/** Fails instead of hanging when a wait never ends. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("RequestThrottle: a burst goes out at once; the next waits until the clock says a token refilled", async () => {
  const clock = manualClock();
  const throttle = new RequestThrottle(50, 2, clock.now); // a token per 20 ms
  await within(1_000, throttle.wait());
  await within(1_000, throttle.wait());
  const third = track(throttle.wait());
  // Several of its 20 ms sleeps pass in real time, but the clock stands: no token yet.
  await pause(100);
  assert.equal(third.done, false, "the third request waits for the refill");
  clock.advance(10); // half a token
  await pause(100);
  assert.equal(third.done, false, "half a token is not a token");
  clock.advance(10);
  await within(5_000, third.promise);
});

Deno.test("RequestThrottle: the bucket refills to the burst at most", async () => {
  const clock = manualClock();
  const throttle = new RequestThrottle(50, 2, clock.now);
  await throttle.wait();
  await throttle.wait();
  clock.advance(10_000); // 500 tokens' worth of time
  await within(1_000, throttle.wait());
  await within(1_000, throttle.wait());
  const third = track(throttle.wait());
  await pause(60);
  assert.equal(third.done, false, "no more than the burst at once");
  clock.advance(20);
  await within(5_000, third.promise);
});

Deno.test("RequestThrottle: without a burst, max(1, qps) go out at once", async () => {
  const clock = manualClock();
  const throttle = new RequestThrottle(3, undefined, clock.now);
  for (let i = 0; i < 3; i++) await within(1_000, throttle.wait());
  const controller = new AbortController();
  const fourth = track(throttle.wait(controller.signal)); // sleeps 333 ms, then again
  await pause(30);
  assert.equal(fourth.done, false);
  controller.abort(new Error("done"));
  await assert.rejects(fourth.promise, { message: "done" });
});

Deno.test("RequestThrottle: an aborted wait rejects with the signal's reason and takes no token", async () => {
  const clock = manualClock();
  const throttle = new RequestThrottle(50, 1, clock.now);
  await throttle.wait();
  const controller = new AbortController();
  const waiting = track(throttle.wait(controller.signal));
  await pause(30);
  assert.equal(waiting.done, false);
  const reason = new Error("operator stops");
  controller.abort(reason);
  await assert.rejects(within(1_000, waiting.promise), (error) => error === reason);
  // A signal aborted before the wait: rejected at once when there is no token.
  await assert.rejects(throttle.wait(AbortSignal.abort(reason)), (error) => error === reason);
  // The aborted waits took nothing: one token after 20 ms, not less.
  clock.advance(20);
  await within(1_000, throttle.wait());
});

Deno.test("RequestThrottle: qps 0 is unlimited, whatever the burst", async () => {
  const clock = manualClock();
  const throttle = new RequestThrottle(0, 1, clock.now);
  for (let i = 0; i < 100; i++) await within(1_000, throttle.wait());
});
