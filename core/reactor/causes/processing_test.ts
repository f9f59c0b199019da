// Unit tests of whole processing cycles over a fake API and a fake clock (no cluster): what is
// written, in how many requests, and when the next cycle is due.
import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../../actions/execution.ts";
import { allAtOnce } from "../../actions/lifecycles.ts";
import { ProgressState } from "../../actions/progression.ts";
import type { KubeObject } from "../../structs/objects.ts";
import {
  changingHandler,
  type CycleFixture,
  cycleFixture,
  memoryOf,
  objectOf,
  watchingHandler,
  withDiffBase,
} from "./cycle/_test_support.ts";
import { Patch } from "../../structs/patches.ts";
import { type CycleResult, needsNoCycle, type ObjectMemory, processEvent } from "./processing.ts";
import type { ChangingHandler } from "../../intents/handlers.ts";
import { createSettings } from "../../settings/settings.ts";
import type { ResourceScope } from "../scope/scope.ts";

const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

/** Runs one cycle as the queue would: the event's body, then the body the cycle wrote. */
async function cycle(
  fixture: CycleFixture,
  memory: ObjectMemory,
  body: KubeObject,
  type: "ADDED" | "MODIFIED" | null = "MODIFIED",
): Promise<CycleResult & { requests: number }> {
  const before = fixture.api.requests.length;
  const result = await processEvent(fixture.deps, memory, { type, body });
  return { ...result, requests: fixture.api.requests.length - before };
}

function progressOf(fixture: CycleFixture, body: KubeObject, id: string) {
  const storage = fixture.deps.settings.persistence.progressStorage;
  return ProgressState.load(storage, body, [id], fixture.clock.now()).get(id);
}

function statusOf(body: KubeObject | undefined): Record<string, unknown> {
  return (body?.status ?? {}) as Record<string, unknown>;
}

function diffBaseOf(fixture: CycleFixture, body: KubeObject) {
  return fixture.deps.settings.persistence.diffbaseStorage.fetch({ body });
}

Deno.test("processEvent() writes a handler's result, progress and diff-base in one request", async () => {
  const calls: string[] = [];
  const fixture = cycleFixture({
    changing: [
      changingHandler("a", "create", () => (calls.push("a"), { made: "a" })),
      changingHandler("b", "create", () => (calls.push("b"), { made: "b" })),
    ],
  });
  const memory = memoryOf();
  const first = await cycle(fixture, memory, fixture.api.put(objectOf()), "ADDED");
  // One handler per cycle (asap): its result and its progress, in one merge patch.
  assert.deepEqual(calls, ["a"]);
  assert.equal(first.requests, 1);
  assert.equal(first.delay, 0, "the next handler is due at once");
  assert.equal(fixture.api.patches[0]!.type, "merge");
  const afterA = first.body!;
  assert.deepEqual(statusOf(afterA).a, { made: "a" });
  assert.equal(progressOf(fixture, afterA, "a")?.success, true);
  assert.equal(diffBaseOf(fixture, afterA), null, "the cause is not complete yet");

  // The last handler: its result, every record purged, the diff-base stored — one request.
  const second = await cycle(fixture, memory, afterA, null);
  assert.deepEqual(calls, ["a", "b"]);
  assert.equal(second.requests, 1);
  const done = second.body!;
  assert.deepEqual(statusOf(done).b, { made: "b" });
  assert.equal(progressOf(fixture, done, "a"), undefined);
  assert.equal(progressOf(fixture, done, "b"), undefined);
  assert.deepEqual(diffBaseOf(fixture, done), { spec: { field: "value" } });
  assert.equal(second.delay, undefined);
  assert.equal(memory.handledOnce, true);
  assert.deepEqual(fixture.messages("info"), [
    "Handler 'a' succeeded.",
    "Handler 'b' succeeded.",
    "Creation is processed: 2 succeeded; 0 failed.",
  ]);

  // Nothing changed since: a noop, no request.
  const third = await cycle(fixture, memory, done, null);
  assert.equal(third.requests, 0);
  assert.deepEqual(calls, ["a", "b"]);
});

Deno.test("processEvent() adds the finalizer in a cycle of its own", async () => {
  const calls: string[] = [];
  const fixture = cycleFixture({
    changing: [
      changingHandler("c", "create", () => calls.push("c")),
      changingHandler("d", "delete", () => calls.push("d")),
    ],
  });
  const result = await cycle(fixture, memoryOf(), fixture.api.put(objectOf()), "ADDED");
  assert.equal(result.requests, 1);
  assert.equal(fixture.api.patches[0]!.type, "json");
  assert.deepEqual(result.body?.metadata?.finalizers, [FINALIZER]);
  assert.equal(result.delay, 0);
  assert.deepEqual(calls, [], "no handler before the finalizer protects the object");
});

Deno.test("processEvent() writes a deletion's results and removes the finalizer in one request", async () => {
  const calls: string[] = [];
  const fixture = cycleFixture({
    changing: [
      changingHandler("d1", "delete", () => (calls.push("d1"), { gone: 1 })),
      changingHandler("d2", "delete", () => (calls.push("d2"), { gone: 2 })),
    ],
  });
  const memory = memoryOf(true);
  const deleting = fixture.api.put(objectOf({
    metadata: { finalizers: ["other", FINALIZER], deletionTimestamp: "2026-01-01T00:00:00Z" },
  }));
  const first = await cycle(fixture, memory, deleting);
  assert.equal(first.requests, 1);
  assert.equal(progressOf(fixture, first.body!, "d1")?.success, true);
  const second = await cycle(fixture, memory, first.body!, null);
  assert.deepEqual(calls, ["d1", "d2"]);
  assert.equal(second.requests, 1, "result, purged progress and finalizer: one JSON patch");
  assert.equal(fixture.api.patches[1]!.type, "json");
  const released = second.body!;
  assert.deepEqual(released.metadata?.finalizers, ["other"]);
  assert.deepEqual(statusOf(released).d2, { gone: 2 });
  assert.equal(progressOf(fixture, released, "d1"), undefined);
  assert.equal(progressOf(fixture, released, "d2"), undefined);
});

Deno.test("processEvent() records a retry's delay in the progress and waits for it in memory", async () => {
  let calls = 0;
  const fixture = cycleFixture({
    changing: [changingHandler("flaky", "create", () => {
      if (++calls === 1) throw new TemporaryError("not yet", { delay: 30 });
      return { ok: true };
    })],
  });
  const memory = memoryOf();
  const started = fixture.clock.now();
  const first = await cycle(fixture, memory, fixture.api.put(objectOf()), "ADDED");
  assert.equal(first.requests, 1);
  assert.equal(first.failed, true);
  assert.equal(first.delay, 30);
  const progress = progressOf(fixture, first.body!, "flaky")!;
  assert.equal(progress.retries, 1);
  assert.equal(progress.message, "not yet");
  assert.equal(progress.delayed?.getTime(), started.getTime() + 30_000);

  fixture.clock.advance(10);
  const early = await cycle(fixture, memory, first.body!, null);
  assert.equal(calls, 1, "not run before its delay");
  assert.equal(early.requests, 0);
  assert.equal(early.delay, 20);

  fixture.clock.advance(20);
  const due = await cycle(fixture, memory, first.body!, null);
  assert.equal(calls, 2);
  assert.equal(due.failed, undefined);
  assert.deepEqual(statusOf(due.body).flaky, { ok: true });
  assert.equal(progressOf(fixture, due.body!, "flaky"), undefined);
});

Deno.test("processEvent() completes the cause after a permanent failure", async () => {
  const fixture = cycleFixture({
    changing: [changingHandler("broken", "create", () => {
      throw new PermanentError("cannot ever");
    })],
  });
  const memory = memoryOf();
  const result = await cycle(fixture, memory, fixture.api.put(objectOf()), "ADDED");
  assert.equal(result.requests, 1);
  assert.equal(result.failed, true);
  assert.equal(result.delay, undefined);
  assert.ok(fixture.messages("error").some((m) => m.includes("cannot ever")));
  assert.ok(fixture.messages("info").includes("Creation is processed: 0 succeeded; 1 failed."));
  assert.deepEqual(diffBaseOf(fixture, result.body!), { spec: { field: "value" } });
  assert.equal(memory.handledOnce, true);
});

Deno.test("processEvent() keeps a refused write and tries it first, without running handlers again", async () => {
  let calls = 0;
  const fixture = cycleFixture({
    changing: [changingHandler("h", "create", () => (++calls, { done: true }))],
  });
  const memory = memoryOf();
  const body = fixture.api.put(objectOf());
  fixture.api.refuse = (request) => request.verb === "patch" ? 403 : undefined;
  const refused = await cycle(fixture, memory, body, "ADDED");
  assert.equal(calls, 1);
  assert.equal(refused.failed, true);
  assert.equal(refused.delay, fixture.deps.settings.queueing.errorDelays[0]);
  assert.equal(memory.unwritten?.tries, 1);
  assert.equal(
    fixture.messages("error").filter((m) => m.startsWith("Permission missing")).length,
    1,
  );

  // Refused again: the same line only at debug level, the next error delay.
  const again = await cycle(fixture, memory, body, null);
  assert.equal(calls, 1, "the handler is not run again");
  assert.equal(again.requests, 1);
  assert.equal(memory.unwritten?.tries, 2);
  assert.equal(again.delay, fixture.deps.settings.queueing.errorDelays[1]);
  assert.equal(
    fixture.messages("error").filter((m) => m.startsWith("Permission missing")).length,
    1,
  );

  // Granted: the kept write lands first, and the object is looked at again at once.
  fixture.api.refuse = undefined;
  const granted = await cycle(fixture, memory, body, null);
  assert.equal(calls, 1);
  assert.equal(granted.requests, 1);
  assert.equal(granted.delay, 0);
  assert.equal(memory.unwritten, undefined);
  assert.deepEqual(statusOf(granted.body).h, { done: true });
  assert.ok(fixture.messages("info").includes("The write refused earlier went through now."));
  // The next look finds the cause complete.
  const settled = await cycle(fixture, memory, granted.body!, null);
  assert.equal(settled.requests, 0);
  assert.equal(calls, 1);
});

Deno.test("processEvent() drops a refused write when the object is gone", async () => {
  const fixture = cycleFixture({ changing: [changingHandler("h", "create", () => ({ x: 1 }))] });
  const memory = memoryOf();
  const body = fixture.api.put(objectOf());
  fixture.api.refuse = () => 403;
  await cycle(fixture, memory, body, "ADDED");
  assert.ok(memory.unwritten);
  const before = fixture.api.requests.length;
  const result = await processEvent(fixture.deps, memory, { type: "DELETED", body });
  assert.equal(memory.unwritten, undefined);
  assert.equal(fixture.api.requests.length, before, "nothing is written to a gone object");
  assert.equal(result.body, undefined);
  assert.equal(result.delay, undefined);
});

Deno.test("processEvent() runs raw-event handlers for watch events only, in the same patch", async () => {
  const seen: Array<string | null> = [];
  const fixture = cycleFixture({
    watching: [watchingHandler("w", (ctx) => (seen.push(ctx.type as string | null), "seen"))],
    changing: [changingHandler("c", "create", () => "created")],
    lifecycle: allAtOnce,
  });
  const memory = memoryOf();
  const result = await cycle(fixture, memory, fixture.api.put(objectOf()), "ADDED");
  assert.deepEqual(seen, ["ADDED"]);
  assert.equal(result.requests, 1);
  assert.equal(statusOf(result.body).w, "seen");
  assert.equal(statusOf(result.body).c, "created");
  await processEvent(fixture.deps, memory, { type: null, body: result.body!, internal: true });
  assert.deepEqual(seen, ["ADDED"], "not for the operator's own re-look");
});

Deno.test("processEvent() purges the records of every changing handler when a cause finishes", async () => {
  const fixture = cycleFixture({
    changing: [
      changingHandler("matching", "update"),
      changingHandler("unmatched", "update", undefined, { labels: { app: "x" } }),
    ],
  });
  const { settings } = fixture.deps;
  // An update handled before, whose record of a handler that no longer matches was left.
  const earlier = ProgressState.load(
    settings.persistence.progressStorage,
    {},
    [],
    fixture.clock.now(),
  );
  earlier.begin("unmatched", "update", fixture.clock.now());
  const records = new Patch();
  earlier.store(settings.persistence.progressStorage, objectOf(), records);
  const recorded = records.view() as KubeObject;
  const handled = withDiffBase(settings, objectOf());
  const body = fixture.api.put({
    ...handled,
    metadata: {
      ...handled.metadata,
      annotations: { ...handled.metadata?.annotations, ...recorded.metadata?.annotations },
    },
    spec: { field: "changed" },
    status: recorded.status,
  } as KubeObject);
  assert.ok(progressOf(fixture, body, "unmatched"), "the record is there to begin with");
  const result = await cycle(fixture, memoryOf(true), body);
  assert.equal(result.requests, 1);
  assert.equal(progressOf(fixture, result.body!, "unmatched"), undefined);
  assert.deepEqual(diffBaseOf(fixture, result.body!), { spec: { field: "changed" } });
});

Deno.test("needsNoCycle() says an object needs no cycle exactly when its first cycle would write nothing and run nothing, listed or watched", async () => {
  const registries: Record<string, () => ChangingHandler[]> = {
    "create+update": () => [changingHandler("c", "create"), changingHandler("u", "update")],
    "create+delete": () => [changingHandler("c", "create"), changingHandler("d", "delete")],
    "optional delete": () => [changingHandler("d", "delete", undefined, { optional: true })],
    "labelled": () => [changingHandler("c", "create", undefined, { labels: { app: "x" } })],
    "field": () => [changingHandler("f", undefined, undefined, { field: ["spec", "field"] })],
    "none": () => [],
  };
  const settings = createSettings();
  const handled = (body: KubeObject) => withDiffBase(settings, body);
  const objects: Record<string, KubeObject> = {
    "new": objectOf(),
    "handled": handled(objectOf()),
    "handled, labelled": handled(objectOf({ metadata: { labels: { app: "x" } } })),
    "handled, then changed": { ...handled(objectOf()), spec: { field: "other" } },
    "handled, with the finalizer": handled(objectOf({ metadata: { finalizers: [FINALIZER] } })),
    "handled, deletion requested, finalizer": handled(objectOf({
      metadata: { finalizers: [FINALIZER], deletionTimestamp: "2026-01-01T00:00:00Z" },
    })),
    "handled, deletion requested, other finalizer": handled(objectOf({
      metadata: { finalizers: ["other"], deletionTimestamp: "2026-01-01T00:00:00Z" },
    })),
    // State that is not JSON fails the cycle (retried with backoff): never quiet.
    "a diff-base that is not JSON": objectOf({
      metadata: {
        annotations: { "kopf.zalando.org/last-handled-configuration": "not json" },
      },
    }),
  };
  let quietCases = 0;
  for (const [registry, handlers] of Object.entries(registries)) {
    for (const [state, body] of Object.entries(objects)) {
      // A listed object (no type) and a watch event of an object whose worker idled out.
      for (const type of [null, "ADDED", "MODIFIED"] as const) {
        const calls: string[] = [];
        const changing = handlers().map((h) => ({ ...h, fn: () => void calls.push(h.id) }));
        const fixture = cycleFixture({ changing, settings });
        const quiet = needsNoCycle(fixture.deps);
        assert.ok(quiet, "these handlers let the stream tell");
        const told = quiet(body);
        const where = `${registry}, ${state}, ${type}`;
        assert.deepEqual(fixture.logs, [], `${where}: the scratch cycle logs nothing`);
        const result = await cycle(fixture, memoryOf(), fixture.api.put(body), type).catch(
          () => ({ requests: -1, delay: undefined }), // the cycle failed: not idle
        );
        const idle = result.requests === 0 && calls.length === 0 && result.delay === undefined;
        assert.equal(told, idle, `${where}: quiet ${told}, the cycle idle ${idle}`);
        if (told) quietCases++;
      }
    }
  }
  // Both answers occur (the restart's case among the quiet ones).
  assert.ok(quietCases >= 18 && quietCases < 144, `${quietCases} quiet cases`);
});

Deno.test("needsNoCycle() does not tell for raw-event, resume, daemon or timer handlers, or callback filters", () => {
  const undecided = [
    cycleFixture({ watching: [watchingHandler("w", () => {})] }),
    cycleFixture({ changing: [changingHandler("r", "resume")] }),
    cycleFixture({ changing: [changingHandler("c", "create", undefined, { when: () => true })] }),
    cycleFixture({
      changing: [changingHandler("c", "create", undefined, { labels: { app: () => true } })],
    }),
  ];
  for (const fixture of undecided) assert.equal(needsNoCycle(fixture.deps), undefined);
  const spawning = cycleFixture();
  const withDaemon = {
    ...spawning.deps,
    spawning: [{ kind: "spawning" } as ResourceScope["spawning"][number]],
  };
  assert.equal(needsNoCycle(withDaemon), undefined);
  assert.ok(needsNoCycle(cycleFixture({ changing: [changingHandler("c", "create")] }).deps));
});
