import { CONFIGMAPS } from "../../client/_test_support.ts";
import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import { type ObjectEvent as WatchedEvent, WatchStalledError } from "../../client/watching.ts";
import type { WatcherEvent } from "../../client/watch_events.ts";
import type { IndexingHandler } from "../../intents/handlers.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import { createSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { Resource } from "../../structs/resources.ts";
import { shardOfObject } from "../../structs/shards.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import { OperatorPause } from "../../engines/coordination/peering.ts";
import type { ObjectEvent as QueuedEvent, ObjectMemory } from "./processing.ts";
import type { SharedInformers } from "../streams/sharing.ts";
import {
  closeStream,
  cycleRunner,
  forgettable,
  indexer,
  LISTING_HOLD_MS,
  listingBrake,
  noticer,
  pausedSource,
  queueRouter,
  shardFilter,
  watchReporter,
  watchSource,
} from "./stream_stages.ts";

function cm(name: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: "1", ...extra },
  };
}

/** Records every call of the parts the stages tell, as `method arg…` lines. */
function recorder() {
  const calls: string[] = [];
  const record = (name: string) => (...args: unknown[]) =>
    void calls.push([name, ...args].join(" "));
  const books = {
    alive: record("alive"),
    listed: record("listed"),
    paused: record("paused"),
    cycle: record("cycle"),
    closed: record("closed"),
  };
  const observer = {
    watchEvent: record("watchEvent"),
    watchConnected: record("watchConnected"),
    cycle: (info: Record<string, unknown>, run: () => Promise<unknown>) => (
      calls.push(`observed ${info.resource} ${info.name} ${info.event}`), run()
    ),
  } as unknown as OperatorObserver;
  const logs: LogEntry[] = [];
  const logger = new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] });
  return { calls, books, observer, logs, logger };
}

Deno.test("shardFilter: none without a shard; the namespace or uid decides; the selector only for servers that filter", () => {
  const space = { count: 4, key: "namespace" as const, serverSide: false };
  assert.equal(shardFilter(undefined, 1, true), undefined);
  assert.equal(shardFilter(space, undefined, true), undefined);
  const object = cm("a");
  const mine = shardOfObject(object, "namespace", 4);
  const filter = shardFilter(space, mine, true)!;
  assert.equal(filter.accept(object), true);
  assert.equal(filter.accept(cm("b")), true, "same namespace, same shard");
  assert.equal(shardFilter(space, (mine + 1) % 4, true)!.accept(object), false);
  assert.equal(filter.selector, undefined);
  // Cluster-scoped: by uid, whatever the space says.
  const byUid = shardOfObject(object, "uid", 4);
  assert.equal(shardFilter(space, byUid, false)!.accept(object), true);
  const server = shardFilter({ ...space, serverSide: true }, mine, true)!;
  assert.match(server.selector!, /metadata\.namespace/);
});

Deno.test("watchSource: a cached resource is tapped from the shared informer with the shard's filter, fresh after a pause", async () => {
  const taps: unknown[] = [];
  const shared = {
    holds: (r: Resource) => r === CONFIGMAPS,
    events: (resource: Resource, namespace: string | undefined, options: unknown) => {
      taps.push({ resource: resource.plural, namespace, options });
      return (async function* () {})();
    },
  } as unknown as SharedInformers;
  const filter = { accept: () => true, selector: "x" };
  const open = watchSource(
    { api: {} as KubeApi, watching: createSettings().watching, shared },
    CONFIGMAPS,
    "ns",
    filter,
    "configmaps",
  );
  const period = new AbortController().signal;
  for await (const _ of open(period, false)) { /* nothing */ }
  for await (const _ of open(period, true)) { /* nothing */ }
  assert.deepEqual(
    taps,
    [false, true].map((fresh) => ({
      resource: "configmaps",
      namespace: "ns",
      options: { accept: filter.accept, signal: period, fresh },
    })),
  );
});

Deno.test("watchSource: a sharded watch sends the selector, drops other shards' objects and counts them as FILTERED", async () => {
  const { calls, observer } = recorder();
  const controller = new AbortController();
  const lists: unknown[] = [];
  const api = {
    http: { connection: { server: "https://k8s" } },
    async *listPages(_: unknown, options: { shardSelector?: string; namespace?: string }) {
      lists.push([options.namespace, options.shardSelector]);
      yield { items: [cm("mine"), cm("theirs")], metadata: { resourceVersion: "5" } };
    },
    watchBytes() {
      controller.abort();
      return Promise.reject(new Error("stop"));
    },
  } as unknown as KubeApi;
  const filter = { accept: (o: KubeObject) => o.metadata?.name === "mine", selector: "sel" };
  const open = watchSource(
    { api, watching: createSettings().watching, observer },
    CONFIGMAPS,
    "ns",
    filter,
    "configmaps",
  );
  const events: string[] = [];
  for await (const event of open(controller.signal)) {
    events.push(event.type + ("object" in event ? ` ${event.object.metadata?.name}` : ""));
  }
  assert.deepEqual(events, ["init", "initApply mine", "initDone"]);
  assert.deepEqual(lists, [["ns", "sel"]]);
  assert.deepEqual(calls, ["watchEvent configmaps FILTERED"]);
});

Deno.test("pausedSource: without peering, the source itself (no extra layer); with it, closed while paused", async () => {
  const source = (async function* () {})();
  const signal = new AbortController().signal;
  assert.equal(pausedSource(undefined, signal, () => source, () => {}), source);
  const pause = new OperatorPause();
  pause.set("test", true);
  const controller = new AbortController();
  let paused = 0, opened = 0;
  const resumes: boolean[] = [];
  const stream = pausedSource(pause, controller.signal, async function* (_, resumed) {
    resumes.push(resumed);
    opened++;
    yield { type: "init" } as WatcherEvent;
  }, () => {
    paused++;
    queueMicrotask(() => pause.set("test", false));
  });
  for await (const _ of stream) {
    controller.abort();
  }
  assert.deepEqual([paused, opened], [1, 1]);
  assert.deepEqual(resumes, [true], "opened after the pause");
});

Deno.test("watchReporter: signs of life, listings, metrics, a first silence at INFO and other failures at WARNING, skipped lines", () => {
  const { calls, books, observer, logs, logger } = recorder();
  const report = watchReporter({
    books,
    key: "k",
    logger,
    observer,
    name: "configmaps",
    label: "configmaps in ns",
  });
  const events: WatcherEvent[] = [
    { type: "connected", resourceVersion: "1", reason: "initial" },
    { type: "init" },
    { type: "initDone", resourceVersion: "2" },
    { type: "bookmark", resourceVersion: "3" },
    { type: "error", error: new WatchStalledError(90_000, { connected: true }), retryInMs: 0 },
    {
      type: "error",
      error: new WatchStalledError(90_000, { connected: true, repeated: true }),
      retryInMs: 0,
    },
    { type: "error", error: new Error("connection reset"), retryInMs: 200 },
    { type: "skipped", reason: "a line that is not JSON (3 characters)" },
    {
      type: "refused",
      reason: 'ConfigMap "ns/deep" nested deeper than 5 levels',
      object: cm("deep"),
    },
  ];
  for (const event of events) report(event);
  assert.deepEqual(calls, [
    "alive k",
    "watchConnected configmaps initial",
    "alive k",
    "listed k",
    "alive k",
    "watchEvent configmaps BOOKMARK",
  ]);
  const expected = [
    /^info Watching configmaps in ns: Watch stream was silent for 90000 ms/,
    /^warning Watching configmaps in ns: Watch stream was silent for 90000 ms/,
    /^warning Watching configmaps in ns: connection reset$/,
    /^warning Watching configmaps in ns: ignored a line that is not JSON \(3 characters\); the stream goes on$/,
    /^error Refused ConfigMap "ns\/deep" nested deeper than 5 levels \(settings.watching.maxDepth\)/,
  ];
  assert.equal(logs.length, expected.length);
  logs.forEach((e, i) => assert.match(`${e.level} ${e.message}`, expected[i]!));
  assert.equal(logs.at(-1)!.object?.name, "deep", "the refusal is about the object");
});

Deno.test("noticer: each object event is a sign of life and a watch metric by type", () => {
  const { calls, books, observer } = recorder();
  const notice = noticer({ books, key: "k", observer, name: "configmaps" });
  const events: WatchedEvent[] = [
    { type: "apply", object: cm("a"), initial: true, raw: null },
    { type: "apply", object: cm("a"), initial: false, raw: "ADDED" },
    { type: "apply", object: cm("a"), initial: false, raw: "MODIFIED" },
    { type: "delete", object: cm("a") },
  ];
  for (const event of events) notice(event);
  assert.deepEqual(calls, [
    "alive k",
    "watchEvent configmaps LISTED",
    "alive k",
    "watchEvent configmaps ADDED",
    "alive k",
    "watchEvent configmaps MODIFIED",
    "alive k",
    "watchEvent configmaps DELETED",
  ]);
});

Deno.test("indexer: none without index handlers; otherwise the object's key, its deletion and a context per handler", async () => {
  const { logger } = recorder();
  const handler = { id: "by-name" } as IndexingHandler;
  const context = (h: IndexingHandler, o: KubeObject, l: Logger) =>
    ({ id: h.id, name: o.metadata?.name, about: l.object?.name }) as unknown as ResourceContext;
  assert.equal(
    indexer({ indexers: { index: () => Promise.resolve() }, handlers: [], logger, context }),
    undefined,
  );
  const seen: unknown[] = [];
  const index = indexer({
    indexers: {
      index: (handlers, key, body, deleted, ctx) => {
        seen.push([handlers.length, key, body.metadata?.name, deleted, ctx(handler)]);
        return Promise.resolve();
      },
    },
    handlers: [handler],
    logger,
    context,
  })!;
  await index({ type: "apply", object: cm("a"), initial: true, raw: null });
  await index({ type: "delete", object: cm("a") });
  const ctx = { id: "by-name", name: "a", about: "a" };
  assert.deepEqual(seen, [[1, "uid-a", "a", false, ctx], [1, "uid-a", "a", true, ctx]]);
});

Deno.test("queueRouter: changes and deletions queued; relisted unchanged objects only for raw-event handlers; an index-only stream queues nothing", () => {
  const events: WatchedEvent[] = [
    { type: "apply", object: cm("a"), initial: true, raw: null },
    { type: "apply", object: cm("a"), initial: false, raw: "MODIFIED" },
    { type: "apply", object: cm("a"), initial: false, raw: null, unchanged: true },
    { type: "delete", object: cm("a") },
  ];
  const route = (role: "full" | "index", raw: boolean) => {
    const pushed: QueuedEvent[] = [];
    const queue = {
      push: (event: QueuedEvent) => void pushed.push(event),
      memory: () => undefined,
    };
    const stage = queueRouter(queue, role, raw);
    for (const event of events) stage(event);
    return pushed.map((e) => `${e.type}${e.forced ? " forced" : ""}`);
  };
  assert.deepEqual(route("full", false), ["null", "MODIFIED", "DELETED"]);
  assert.deepEqual(route("full", true), ["null", "MODIFIED", "null forced", "DELETED"]);
  assert.deepEqual(route("index", true), []);
});

Deno.test("queueRouter: a listed or watched object whose cycle would do nothing is not queued, unless the queue knows it; deletions always are", () => {
  const pushed: string[] = [];
  const known = new Set(["uid-b"]);
  const asked: string[] = [];
  const queue = {
    push: (event: QueuedEvent) => void pushed.push(`${event.type} ${event.body.metadata?.name}`),
    memory: (key: string) => known.has(key) ? ({} as ObjectMemory) : undefined,
  };
  const quiet = (body: KubeObject) => {
    asked.push(body.metadata!.name!);
    return body.metadata?.name !== "c"; // "c" changed while the operator was away
  };
  const stage = queueRouter(queue, "full", false, quiet);
  stage({ type: "apply", object: cm("a"), initial: true, raw: null }); // quiet: not queued
  stage({ type: "apply", object: cm("b"), initial: true, raw: null }); // known: queued, not asked
  stage({ type: "apply", object: cm("c"), initial: true, raw: null }); // not quiet: queued
  stage({ type: "apply", object: cm("a"), initial: false, raw: "MODIFIED" }); // an echo: quiet
  stage({ type: "apply", object: cm("b"), initial: false, raw: "MODIFIED" }); // known: queued
  stage({ type: "apply", object: cm("c"), initial: false, raw: "ADDED" }); // not quiet: queued
  stage({ type: "delete", object: cm("a") }); // never asked
  assert.deepEqual(pushed, ["null b", "null c", "MODIFIED b", "ADDED c", "DELETED a"]);
  assert.deepEqual(asked, ["a", "c", "a", "c"]);
});

Deno.test("listingBrake: off when null; listed objects wait for room, watch events never; a listing is held up for a bounded time", async () => {
  const signal = new AbortController().signal;
  const asked: number[] = [];
  let room: (() => void) | undefined;
  const queue = {
    room: (limit: number) => {
      asked.push(limit);
      return room ? undefined : new Promise<void>((resolve) => room = resolve);
    },
  };
  assert.equal(listingBrake(queue, null, signal), undefined);
  let clock = 0;
  const brake = listingBrake(queue, 10, signal, () => clock)!;
  const listed: WatchedEvent = { type: "apply", object: cm("a"), initial: true, raw: null };
  const watched: WatchedEvent = { type: "apply", object: cm("a"), initial: false, raw: "ADDED" };
  assert.equal(brake(watched), undefined); // a watch event is never held: the room is not asked
  assert.deepEqual(asked, []);
  const held = brake(listed)!;
  assert.ok(held instanceof Promise);
  assert.deepEqual(asked, [10]);
  clock += LISTING_HOLD_MS; // the listing was held up for the whole bound…
  room!();
  await held;
  room = undefined;
  asked.length = 0;
  assert.equal(brake(listed), undefined); // …so it reads on without asking
  assert.deepEqual(asked, []);
  assert.equal(brake(watched), undefined); // the listing is over: the next one is held again
  const next = brake(listed);
  assert.ok(next instanceof Promise);
  room!();
  await next;
});

Deno.test("cycleRunner: counted and observed; waits out a pause away from the admission gate; none after the stop", async () => {
  const { calls, books, observer } = recorder();
  const controller = new AbortController();
  const pause = new OperatorPause();
  const away: unknown[] = [];
  const gate = { away: (fn: () => Promise<void>) => (away.push(fn), fn()) };
  const run = cycleRunner(
    {
      paused: pause,
      gate: gate as never,
      books,
      observer,
      name: "configmaps",
      signal: controller.signal,
    },
    (_memory, event) => (calls.push(`cycle of ${event.body.metadata?.name}`), Promise.resolve({})),
  );
  const memory = {} as ObjectMemory;
  await run(memory, { type: "MODIFIED", body: cm("a") });
  assert.deepEqual(calls, ["cycle", "observed configmaps a MODIFIED", "cycle of a"]);
  assert.equal(away.length, 0);
  calls.length = 0;
  pause.set("test", true);
  const waiting = run(memory, { type: null, body: cm("b"), internal: true });
  await Promise.resolve();
  assert.deepEqual(calls, [], "nothing while paused");
  pause.set("test", false);
  await waiting;
  assert.equal(away.length, 1, "the wait is away from the gate");
  assert.deepEqual(calls, ["cycle", "observed configmaps b null", "cycle of b"]);
  controller.abort(new Error("stopped"));
  await assert.rejects(run(memory, { type: "MODIFIED", body: cm("c") }), /stopped/);
});

Deno.test("forgettable: an idle object's memory goes unless it holds daemons, a latest body, a changed memo, or its resumption", () => {
  class Memo {
    [key: string]: unknown;
    shared = 1;
  }
  const base = new Memo();
  const memo = () => Object.assign(Object.create(Memo.prototype), base);
  const memory = (extra: Partial<ObjectMemory> = {}) =>
    ({ memo: memo(), handledOnce: true, ...extra }) as ObjectMemory;
  const plain = forgettable(base, false);
  assert.equal(plain(memory()), true);
  assert.equal(plain(memory({ spawner: {} as never })), false);
  assert.equal(plain(memory({ latest: cm("a") } as never)), false);
  const changed = memory();
  changed.memo.extra = 1;
  assert.equal(plain(changed), false);
  assert.equal(plain(memory({ memo: { shared: 1 } })), false, "another class");
  const resuming = forgettable(base, true);
  assert.equal(resuming(memory()), false);
  assert.equal(resuming(memory({ handledOnce: false })), true);
});

Deno.test("closeStream: told closed, daemons stopped within the grace period, the queue drained, then the work aborted — even when draining fails", async () => {
  const settings = createSettings({ process: { gracePeriod: 7 }, queueing: { exitTimeout: 3 } });
  for (const fails of [false, true]) {
    const { calls, books } = recorder();
    const work = new AbortController();
    const spawner = {
      stopAll: (grace: number) => (calls.push(`stopAll ${grace}`), Promise.resolve()),
    };
    const queue = {
      memories: () => [{ spawner }, {}] as unknown as ObjectMemory[],
      drain: (timeout: number) => {
        calls.push(`drain ${timeout} aborted=${work.signal.aborted}`);
        return fails ? Promise.reject(new Error("drain")) : Promise.resolve();
      },
    };
    const closing = closeStream(books, "k", queue, settings, work);
    if (fails) await assert.rejects(closing, /drain/);
    else await closing;
    assert.deepEqual(calls, ["closed k", "stopAll 7", "drain 3 aborted=false"]);
    assert.equal(work.signal.aborted, true);
  }
});
