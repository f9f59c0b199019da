// The one context builder: every handler kind gets the same fields of the object and of the
// operator, as the four builders it replaced gave them (makeResourceContext, the sub-handlers'
// buildContext, reconcileContext and the spawner's closure; their field sets are copied below).
import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import { KubeClient } from "../../client/client.ts";
import { NO_CREDENTIALS } from "../../client/connection.ts";
import { Index, Indexers } from "../../engines/runners/indexing.ts";
import type { SpawningHandler } from "../../intents/handlers.ts";
import type { CacheReader, ReconcileContext } from "../../intents/reconciliation.ts";
import { createSettings } from "../../settings/settings.ts";
import { Patch } from "../../structs/patches.ts";
import {
  changingHandler,
  cycleFixture,
  memoryOf,
  objectOf,
  RESOURCE,
  watchingHandler,
} from "../causes/cycle/_test_support.ts";
import { spawnerOf } from "../causes/cycle/spawning.ts";
import { processEvent } from "../causes/processing.ts";
import { handlerContext } from "./context.ts";

/** What the old builders gave every kind: the object's fields and the operator's parts. */
const BASE = [
  "annotations",
  "body",
  "client",
  "indices",
  "labels",
  "logger",
  "memo",
  "meta",
  "name",
  "namespace",
  "param",
  "patch",
  "resource",
  "settings",
  "signal",
  "spec",
  "status",
  "uid",
];
/** The kinds' own fields on top, as the old builders (and the spawner) added them. */
const OWN = {
  changing: [
    "diff",
    "execute",
    "new",
    "old",
    "reason",
    "retry",
    "runtime",
    "started",
    "subhandler",
  ],
  event: ["event", "type"],
  daemon: ["retry", "runtime", "sleep", "started", "stopped", "stoppingReasons"],
  reconcile: ["apply", "cache", "deleting", "retry"],
};
const fieldsOf = (kind: keyof typeof OWN) => [...BASE, ...OWN[kind]].sort();

Deno.test("handlerContext(): a resource handler, its sub-handler, an event handler and a daemon get the fields the old builders gave", async () => {
  const keys: Record<string, string[]> = {};
  const fixture = cycleFixture({
    changing: [changingHandler("parent", "create", (ctx) => {
      keys.changing = Object.keys(ctx).sort();
      (ctx.subhandler as (fn: (c: object) => void, o: object) => void)((c) => {
        keys.sub = Object.keys(c).sort();
      }, { id: "child" });
    })],
    watching: [watchingHandler("event", (ctx) => void (keys.event = Object.keys(ctx).sort()))],
  });
  const memory = memoryOf();
  let body = fixture.api.put(objectOf());
  for (let i = 0; i < 3; i++) {
    body = (await processEvent(fixture.deps, memory, { type: "ADDED", body })).body ?? body;
  }
  // A daemon, spawned for the same object with the same scope.
  const stop = new AbortController();
  let ran!: () => void;
  const started = new Promise<void>((resolve) => ran = resolve);
  const daemon = {
    kind: "spawning",
    spawn: "daemon",
    id: "daemon",
    param: undefined,
    fn: async (ctx: { stopped: AbortSignal }) => {
      keys.daemon = Object.keys(ctx).sort();
      ran();
      await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
    },
  } as unknown as SpawningHandler;
  const scope = { ...fixture.deps, spawning: [daemon], signal: stop.signal };
  const spawner = spawnerOf(scope, memoryOf(), body)!;
  spawner.adjust([daemon], body, { deleted: false, changed: false });
  await started;
  await spawner.stopAll(1);
  stop.abort();

  assert.deepEqual(keys.changing, fieldsOf("changing"));
  assert.deepEqual(keys.sub, fieldsOf("changing"), "a sub-handler: as its parent");
  assert.deepEqual(keys.event, fieldsOf("event"));
  assert.deepEqual(keys.daemon, fieldsOf("daemon"));
});

Deno.test("handlerContext(): the reconcile context's own fields, and the indices by name winning over the built-in names, as for cause handlers", () => {
  const byTier = new Index(), labels = new Index();
  const indexers = new Indexers([]);
  Object.assign(indexers.indices, { byTier, labels });
  const client = new KubeClient({
    server: "https://127.0.0.1:1",
    credentials: NO_CREDENTIALS,
    source: "test",
  });
  const signal = new AbortController().signal;
  const ctx = handlerContext(
    { resource: RESOURCE, settings: createSettings(), indexers, client, signal },
    {
      body: {
        metadata: { name: "a", namespace: "ns", uid: "u", labels: { tier: "web" } },
        spec: { size: 1 },
      },
      memo: {},
      patch: new Patch(),
      logger: new Logger(["kopf", "test"]),
      param: "p",
    },
    {
      deleting: false,
      retry: 0,
      cache: {} as CacheReader,
      apply: (() => Promise.resolve(undefined)) as unknown as ReconcileContext["apply"],
    },
  ) as ReconcileContext & Record<string, unknown>;
  assert.deepEqual(Object.keys(ctx).sort(), [...fieldsOf("reconcile"), "byTier"].sort());
  assert.deepEqual(ctx.spec, { size: 1 });
  assert.equal(ctx.name, "a");
  assert.equal(ctx.param, "p");
  assert.equal(ctx.signal, signal, "the scope's own signal, not a copy");
  assert.equal(ctx["byTier"], byTier);
  assert.equal(ctx.indices["byTier"], byTier);
  assert.equal(ctx.labels, labels, "an index named like a built-in wins");
  assert.equal(ctx.deleting, false);
});

Deno.test("handlerContext(): the fields given to win over the indices do, and an attempt's signal follows the scope's", () => {
  const indexers = new Indexers(["reason"]);
  const scopeStop = new AbortController();
  const attempt = new AbortController();
  const ctx = handlerContext(
    {
      resource: RESOURCE,
      settings: createSettings(),
      indexers,
      client: {} as KubeClient,
      signal: scopeStop.signal,
    },
    {
      body: objectOf(),
      memo: {},
      patch: new Patch(),
      logger: new Logger(["kopf", "test"]),
      param: undefined,
      signal: attempt.signal,
    },
    {},
    { reason: "create" },
  );
  assert.equal(ctx.reason, "create");
  assert.equal(ctx.signal.aborted, false);
  scopeStop.abort();
  assert.equal(ctx.signal.aborted, true);
});

Deno.test("a sub-handler's ctx.param is its own (Kopf: param= of the sub-handler, None without), not its parent's (HK-SUB-09)", async () => {
  const params: Record<string, unknown> = {};
  const parent = changingHandler("parent", "create", (ctx) => {
    params.parent = ctx.param;
    const subhandler = ctx.subhandler as (fn: (c: { param: unknown }) => void, o: object) => void;
    subhandler((c) => void (params.own = c.param), { id: "own", param: "child" });
    subhandler((c) => void (params.none = c.param), { id: "none" });
  });
  const fixture = cycleFixture({ changing: [{ ...parent, param: "p" }] });
  const memory = memoryOf();
  let body = fixture.api.put(objectOf());
  for (let i = 0; i < 3; i++) {
    body = (await processEvent(fixture.deps, memory, { type: "ADDED", body })).body ?? body;
  }
  assert.deepEqual(params, { parent: "p", own: "child", none: undefined });
});
