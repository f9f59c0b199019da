import assert from "node:assert/strict";
import { createSettings } from "../../settings/settings.ts";
import {
  aborted,
  disposedPart,
  type Part,
  runParts,
  type RunPartsOptions,
} from "../../util/parts.ts";
import { termGroups } from "./stopping.ts";

/** A part that records its start, when it is told to stop, and when it finished. */
function recorded(
  log: string[],
  name: string,
  group: string,
  behaviour: {
    /** Its start fails (its `ready` rejects with this error). */
    failStart?: Error;
    /** It finishes only when this resolves (after being told). */
    finishWhen?: Promise<void>;
    /** It finishes on its own, with this outcome (undefined: resolves). */
    exits?: { error?: Error; when: Promise<void> };
  } = {},
): Part {
  return {
    name,
    group,
    start(signal) {
      log.push(`start ${name}`);
      const told = aborted(signal).then(() => void log.push(`told ${name}`));
      const ready = behaviour.failStart ? Promise.reject(behaviour.failStart) : Promise.resolve();
      const exit = behaviour.exits;
      const finished = exit
        ? exit.when.then(() => {
          log.push(`exited ${name}`);
          if (exit.error) throw exit.error;
        })
        : told.then(() => behaviour.finishWhen).then(() => void log.push(`stopped ${name}`));
      return { ready, finished };
    },
  };
}

/** The term's groups, as serveTerm uses them (a grace period of 0: no worker waits here). */
function options(signal: AbortSignal, seen: { missing: string[]; failures: unknown[] }) {
  const settings = createSettings();
  settings.process.gracePeriod = 0;
  return {
    signal,
    groups: termGroups(settings),
    onFailure: (error: unknown) => seen.failures.push(error),
    onMissing: (why: string) => seen.missing.push(why),
    onStopping: () => seen.missing.push("(stopping)"),
  } satisfies RunPartsOptions;
}

/** Lets every pending promise callback run. */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

Deno.test("parts start in the given order and stop by groups in the term's stop order", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const stop = new AbortController();
  const run = runParts(options(stop.signal, seen), async (parts) => {
    await parts.start(recorded(log, "peering", "presence"));
    await parts.start(recorded(log, "poster", "reporting"));
    await parts.start(recorded(log, "cache", "caches"));
    await parts.start(recorded(log, "shards", "coordination"));
    await parts.start(recorded(log, "webhooks", "intake"));
    await parts.start(recorded(log, "workers", "workers"));
  });
  await settle();
  assert.deepEqual(log, [
    "start peering",
    "start poster",
    "start cache",
    "start shards",
    "start webhooks",
    "start workers",
  ]);
  stop.abort();
  await run;
  const stopping = log.slice(6);
  // The "at once" groups hear the stop together, before any "in turn" group is told.
  const toldAtOnce = ["told poster", "told shards", "told webhooks", "told workers"];
  for (const entry of toldAtOnce) {
    assert.ok(stopping.indexOf(entry) < stopping.indexOf("told cache"), entry);
  }
  // The cache is told after the coordination finished, peering after the cache.
  assert.ok(stopping.indexOf("stopped shards") < stopping.indexOf("told cache"));
  assert.ok(stopping.indexOf("stopped cache") < stopping.indexOf("told peering"));
  assert.equal(stopping.at(-1), "stopped peering");
  assert.deepEqual(seen, { missing: ["(stopping)"], failures: [] });
});

Deno.test("a start that fails half-way stops what had started, in the stop order", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const broken = new Error("cannot serve the webhooks");
  const stop = new AbortController();
  await assert.rejects(
    runParts(options(stop.signal, seen), async (parts) => {
      await parts.start(recorded(log, "peering", "presence"));
      await parts.start(recorded(log, "poster", "reporting"));
      await parts.start(recorded(log, "cache", "caches"));
      await parts.start(recorded(log, "webhooks", "intake", { failStart: broken }));
      await parts.start(recorded(log, "workers", "workers"));
    }),
    (error) => error === broken,
  );
  assert.ok(!log.includes("start workers"), "nothing starts after the failed start");
  assert.ok(!stop.signal.aborted, "the stop came from the failed start, not from outside");
  const stopped = log.filter((entry) => entry.startsWith("stopped "));
  // In the groups' order: reporting, intake, caches, presence.
  assert.deepEqual(stopped, [
    "stopped poster",
    "stopped webhooks",
    "stopped cache",
    "stopped peering",
  ]);
  assert.deepEqual(seen, { missing: [], failures: [] }, "a failed start is no stop request");
});

Deno.test("a part that finishes on its own is named, and the term runs on until its stop", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const stop = new AbortController();
  let exit!: () => void;
  const exits = { when: new Promise<void>((resolve) => exit = resolve) };
  const run = runParts(options(stop.signal, seen), async (parts) => {
    await parts.start(recorded(log, "the webhook server", "intake", { exits }));
    await parts.start(recorded(log, "workers", "workers"));
  });
  await settle();
  exit();
  await settle();
  assert.deepEqual(seen.missing, ["The webhook server is not running: it exited"]);
  assert.ok(!log.includes("told workers"), "the other parts go on");
  stop.abort();
  await run;
  assert.deepEqual(seen, {
    missing: ["The webhook server is not running: it exited", "(stopping)"],
    failures: [],
  });
});

Deno.test("a part that fails is named, fails the run, and the whole stop still runs", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const broken = new Error("the test broke the webhook server\nsecond line");
  let exit!: () => void;
  const exits = { error: broken, when: new Promise<void>((resolve) => exit = resolve) };
  const run = runParts(options(new AbortController().signal, seen), async (parts) => {
    await parts.start(recorded(log, "peering", "presence"));
    await parts.start(recorded(log, "the webhook server", "intake", { exits }));
    await parts.start(recorded(log, "workers", "workers"));
  });
  await settle();
  exit();
  await assert.rejects(run, (error) => error === broken);
  assert.deepEqual(seen.failures, [broken]);
  assert.deepEqual(seen.missing, [
    "The webhook server is not running: the test broke the webhook server",
    "(stopping)",
  ]);
  assert.deepEqual(log.filter((entry) => entry.startsWith("stopped ")), [
    "stopped workers",
    "stopped peering",
  ]);
});

Deno.test("the stop goes on after a group's deadline without waiting for it", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const stop = new AbortController();
  let release!: () => void;
  const finishWhen = new Promise<void>((resolve) => release = resolve);
  const run = runParts(options(stop.signal, seen), async (parts) => {
    await parts.start(recorded(log, "peering", "presence"));
    await parts.start(recorded(log, "workers", "workers", { finishWhen }));
  });
  await settle();
  stop.abort();
  await run; // with a grace period of 0, the workers that ignore their stop are left behind
  assert.ok(log.includes("stopped peering"));
  assert.ok(!log.includes("stopped workers"));
  release();
});

Deno.test("a disposed part is disposed of in its turn", async () => {
  const log: string[] = [];
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  const stop = new AbortController();
  const cache = { [Symbol.asyncDispose]: () => Promise.resolve(void log.push("disposed cache")) };
  const run = runParts(options(stop.signal, seen), async (parts) => {
    await parts.start(disposedPart("the informer cache", "caches", cache));
    await parts.start(recorded(log, "workers", "workers"));
  });
  await settle();
  assert.deepEqual(log, ["start workers"]);
  stop.abort();
  await run;
  assert.deepEqual(log, ["start workers", "told workers", "stopped workers", "disposed cache"]);
  assert.deepEqual(seen, { missing: ["(stopping)"], failures: [] });
});

Deno.test("a part in no group of the run is refused", async () => {
  const seen = { missing: [] as string[], failures: [] as unknown[] };
  await assert.rejects(
    runParts(options(new AbortController().signal, seen), async (parts) => {
      await parts.start(recorded([], "stray", "elsewhere"));
    }),
    /stray: no stop group elsewhere/,
  );
});
