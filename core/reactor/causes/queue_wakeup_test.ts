// Unit tests of how a waiting per-object worker wakes up for a new event (no API, no handlers):
// without a timer (Deno's shortest timer waits at least 1 ms), and still after the rest of the
// events that arrived in the same turn (one chunk of the watch stream), which collapse.
import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import { createSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { ObjectEvent } from "./processing.ts";
import { ObjectQueue } from "./queueing.ts";

function event(rv: string): ObjectEvent {
  const body = {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { uid: "u1", name: "n1", namespace: "ns", resourceVersion: rv },
  } as KubeObject;
  return { type: "MODIFIED", body };
}

/** A queue without a batch window (the default) whose `process` reports each call. */
function queueOf(onProcess: (rv: string | undefined) => void) {
  const controller = new AbortController();
  const queue = new ObjectQueue({
    settings: createSettings({}).queueing,
    logger: new Logger(["kopf", "test"], { listeners: [] }),
    signal: controller.signal,
    createMemo: () => ({}),
    process: (_memory, ev) => {
      onProcess(ev.body.metadata?.resourceVersion);
      return Promise.resolve({});
    },
  });
  return { queue, stop: () => controller.abort() };
}

/** Counts the timers armed while `during` runs. */
async function countTimers(during: () => Promise<void>): Promise<number> {
  type Timers = { setTimeout: (fn: () => void, ms?: number) => unknown };
  const timers = globalThis as unknown as Timers;
  const real = timers.setTimeout;
  let armed = 0;
  timers.setTimeout = (fn, ms) => {
    armed++;
    return real.call(globalThis, fn, ms);
  };
  try {
    await during();
  } finally {
    timers.setTimeout = real;
  }
  return armed;
}

Deno.test("a waiting worker wakes up for a new event without arming a timer", async () => {
  let seen: ((rv: string | undefined) => void) | undefined;
  const next = () => new Promise<string | undefined>((resolve) => (seen = resolve));
  const { queue, stop } = queueOf((rv) => seen?.(rv));
  try {
    let processed = next();
    queue.push(event("1"));
    assert.equal(await processed, "1");
    await new Promise((resolve) => setTimeout(resolve, 5)); // the worker now waits
    const armed = await countTimers(async () => {
      processed = next();
      queue.push(event("2"));
      assert.equal(await processed, "2");
    });
    assert.equal(armed, 0, "a timer was armed between the event and its processing");
  } finally {
    stop();
    await queue.drain(1);
  }
});

Deno.test("events that arrive in the same turn still collapse to the latest", async () => {
  const calls: (string | undefined)[] = [];
  let seen: (() => void) | undefined;
  const { queue, stop } = queueOf((rv) => {
    calls.push(rv);
    seen?.();
  });
  try {
    let processed = new Promise<void>((resolve) => (seen = resolve));
    queue.push(event("1"));
    await processed;
    await new Promise((resolve) => setTimeout(resolve, 5)); // the worker now waits
    processed = new Promise<void>((resolve) => (seen = resolve));
    // One chunk of the watch stream: its events are pushed one after another in one turn.
    queue.push(event("2"));
    await Promise.resolve();
    queue.push(event("3"));
    await Promise.resolve();
    queue.push(event("4"));
    await processed;
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(calls, ["1", "4"]);
  } finally {
    stop();
    await queue.drain(1);
  }
});
