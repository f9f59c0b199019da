// Unit tests of wake-ups (a daemon or timer exited) against the per-object queue, without a
// cluster: a wake that comes while a cycle runs re-processes the object with the body it has at
// the end of that cycle, never an older one. Each wake is placed with explicit promises (not by
// counting await ticks): exactly between the cycle's work (its patch) and the cycle's end.
import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import type { Spawner } from "../../engines/runners/daemons.ts";
import type { SpawningHandler } from "../../intents/handlers.ts";
import { createSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { cycleFixture, objectOf } from "./cycle/_test_support.ts";
import {
  type CycleResult,
  type ObjectEvent,
  type ObjectMemory,
  processEvent,
} from "./processing.ts";
import { ObjectQueue } from "./queueing.ts";
import { sleep, until } from "../../util/_test_support.ts";

const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

/** A queue over `process`; `settled()` tells that no cycle runs or waits. */
function queueOf(
  process: (memory: ObjectMemory, event: ObjectEvent) => Promise<CycleResult>,
  signal: AbortSignal,
  idleTimeout = 60,
): ObjectQueue & { settled(): boolean } {
  let running = 0;
  const queue = new ObjectQueue({
    settings: createSettings({ queueing: { batchWindow: 0, idleTimeout } }).queueing,
    process: async (memory, event) => {
      running++;
      try {
        return await process(memory, event);
      } finally {
        running--;
      }
    },
    createMemo: () => ({}),
    logger: new Logger(["kopf", "test"]),
    signal,
  });
  return Object.assign(queue, { settled: () => running === 0 && queue.waiting === 0 });
}

Deno.test("A daemon exiting during the cycle that stops it wakes the object with the body that cycle ends with (deletion)", async () => {
  let starts = 0;
  let exit!: () => void;
  const exited = new Promise<void>((resolve) => exit = resolve);
  const daemon: SpawningHandler = {
    kind: "spawning",
    spawn: "daemon",
    id: "d",
    param: undefined,
    fn: (async (ctx: { stopped: AbortSignal }) => {
      starts++;
      await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
      await exited; // exits only when the test says so
    }) as SpawningHandler["fn"],
  };
  const fixture = cycleFixture();
  const deps = { ...fixture.deps, spawning: [daemon] };
  const controller = new AbortController();
  const seen: KubeObject[] = []; // the body of every cycle, in order
  let deletion: KubeObject | undefined;
  let wakeFolded: Promise<void> | undefined;
  const queue = queueOf(async (memory, event) => {
    seen.push(structuredClone(event.body));
    const result = await processEvent(deps, memory, event);
    if (event.body === deletion) {
      // The cycle that stopped the daemon did its work; before it ends, the daemon exits (its
      // exit wakes the object up).
      deletion = undefined;
      exit();
      wakeFolded = until(() => !memory.spawner!.holding, "the daemon to exit");
      await wakeFolded;
    }
    return result;
  }, controller.signal);
  try {
    queue.push({ type: "ADDED", body: fixture.api.put(objectOf()) });
    await until(() => starts === 1, "the daemon to start");
    await until(() => queue.settled(), "the cycles to settle");
    const spawner = queue.memories()[0]!.spawner as Spawner;
    assert.equal(spawner.holding, true);

    // Deletion is requested: the cycle stops the daemon, which exits during that same cycle.
    const stored = fixture.api.stored(objectOf());
    assert.deepEqual(stored.metadata?.finalizers, [FINALIZER]);
    deletion = fixture.api.put({
      ...stored,
      metadata: {
        ...stored.metadata,
        resourceVersion: "900",
        deletionTimestamp: "2026-01-02T03:04:05Z",
      },
    });
    const from = seen.length;
    queue.push({ type: "MODIFIED", body: deletion });
    await until(() => wakeFolded !== undefined, "the deletion's cycle");
    await wakeFolded;
    await until(() => queue.settled(), "the cycles after the wake-up");
    // Every cycle since the deletion saw the deletion mark: none re-processed the older body
    // (which would respawn the daemon and keep the finalizer).
    const after = seen.slice(from);
    assert.ok(after.length >= 2, "the wake-up re-processed the object");
    assert.deepEqual(
      after.map((body) => [body.metadata?.resourceVersion, body.metadata?.deletionTimestamp]),
      after.map((body) => [body.metadata?.resourceVersion, "2026-01-02T03:04:05Z"]),
    );
    assert.deepEqual(fixture.api.stored(objectOf()).metadata?.finalizers ?? [], []);
    assert.equal(starts, 1, "the daemon was not respawned");
  } finally {
    controller.abort();
    await Promise.all(queue.memories().map((m) => m.spawner?.stopAll(1)));
    await queue.drain(5);
  }
});

Deno.test("A wake during a cycle never replaces a newer event that arrived meanwhile with an older body", async () => {
  const body = (rv: string) => objectOf({ metadata: { resourceVersion: rv } });
  const controller = new AbortController();
  const seen: string[] = [];
  let release!: () => void;
  let inCycle2!: () => void;
  const cycle2 = new Promise<void>((resolve) => inCycle2 = resolve);
  const queue = queueOf(async (memory, event) => {
    const rv = event.body.metadata!.resourceVersion!;
    seen.push(rv);
    // The object has a daemon or timer: its memory keeps the latest body for wake-ups.
    memory.spawner ??= {} as Spawner;
    if (rv === "2") {
      inCycle2();
      await new Promise<void>((resolve) => release = resolve);
    }
    return {}; // nothing written
  }, controller.signal);
  try {
    queue.push({ type: "ADDED", body: body("1") });
    await until(() => seen.length === 1 && queue.settled(), "the first cycle");
    queue.push({ type: "MODIFIED", body: body("2") });
    await cycle2;
    // While cycle 2 runs: a newer change arrives, then a daemon exits.
    queue.push({ type: "MODIFIED", body: body("3") });
    queue.memory("uid-1")!.wake();
    release();
    await until(() => seen.length >= 3 && queue.settled(), "the next cycle");
    await sleep(20); // nothing else is due: no cycle of an older body comes later either
    assert.deepEqual(seen, ["1", "2", "3"]);
  } finally {
    controller.abort();
    await queue.drain(5);
  }
});

Deno.test("A wake while the worker idles, or after it exited, re-processes the body the last cycle ended with", async () => {
  const controller = new AbortController();
  const seen: KubeObject[] = [];
  const queue = queueOf(
    (memory, event) => {
      seen.push(event.body);
      memory.spawner ??= {} as Spawner;
      // The first cycle writes: the stored object moves on to resourceVersion 2.
      const written = seen.length === 1
        ? { body: objectOf({ metadata: { resourceVersion: "2" } }), settled: true }
        : {};
      return Promise.resolve(written);
    },
    controller.signal,
    0.05,
  );
  try {
    queue.push({ type: "ADDED", body: objectOf() });
    await until(() => seen.length === 1 && queue.settled(), "the first cycle");
    queue.memory("uid-1")!.wake();
    await until(() => seen.length === 2, "the wake-up's cycle");
    assert.equal(seen[1]!.metadata?.resourceVersion, "2");
    await until(() => queue.active === 0, "the worker to exit idle");
    queue.memory("uid-1")!.wake();
    await until(() => seen.length === 3, "the second wake-up's cycle");
    assert.equal(seen[2]!.metadata?.resourceVersion, "2");
  } finally {
    controller.abort();
    await queue.drain(5);
  }
});
