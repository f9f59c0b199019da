/**
 * Kopf's indexing rules on the indices themselves (no API server involved): keys, values, and
 * what errors do to an object's values.
 */
import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import { PermanentError, TemporaryError } from "../../actions/execution.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import type { IndexingHandler } from "../../intents/handlers.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { Indexers } from "./indexing.ts";

const body = (uid: string): KubeObject => ({ metadata: { name: uid, namespace: "ns", uid } });

function handler(fn: (uid: string) => unknown): IndexingHandler & { calls: number } {
  const h = {
    kind: "indexing" as const,
    id: "idx",
    param: undefined,
    calls: 0,
    fn: (ctx: ResourceContext) => {
      h.calls++;
      return fn(ctx.body.metadata!.uid!);
    },
  };
  return h as unknown as IndexingHandler & { calls: number };
}

async function index(indexers: Indexers, h: IndexingHandler, uid: string, logs: LogEntry[] = []) {
  const logger = new Logger(["kopf", "test"], { listeners: [(e) => logs.push(e)] });
  const b = body(uid);
  await indexers.index(
    [h],
    uid,
    b,
    false,
    () => ({ body: b }) as unknown as ResourceContext,
    logger,
  );
}

function values(indexers: Indexers, key: unknown): unknown[] {
  return indexers.indices.idx!.get(key)?.toArray().sort() ?? [];
}

Deno.test("indices: multi-part keys (tuples as arrays, in a Map) and several keys per object (HK-IDX-07)", async () => {
  const h = handler((uid) =>
    new Map<unknown, unknown>([[["ns", uid], "tuple"], ["plain", uid], ["other", uid]])
  );
  const indexers = new Indexers(["idx"]);
  await index(indexers, h, "a");
  await index(indexers, h, "b");
  assert.deepEqual(values(indexers, ["ns", "a"]), ["tuple"]);
  assert.deepEqual(values(indexers, ["ns", "b"]), ["tuple"]);
  assert.deepEqual(values(indexers, "plain"), ["a", "b"]);
  assert.deepEqual(values(indexers, "other"), ["a", "b"]);
});

Deno.test("indices: a result that is not a mapping is stored under the key null (HK-IDX-08)", async () => {
  const indexers = new Indexers(["idx"]);
  await index(indexers, handler((uid) => `value-${uid}`), "a");
  await index(indexers, handler(() => ["x", 1]), "b");
  assert.deepEqual(indexers.indices.idx!.keys(), [null]);
  assert.deepEqual(indexers.indices.idx!.get(null)?.toArray(), ["value-a", ["x", 1]]);
});

Deno.test("indices: errors are never retried; an arbitrary one keeps the stale values and logs its stack; Kopf's errors log briefly (HK-IDX-11, 14)", async () => {
  let fail = false;
  const h = handler((uid) => {
    if (fail) throw new Error("boom");
    return { k: uid };
  });
  const indexers = new Indexers(["idx"]);
  const logs: LogEntry[] = [];
  await index(indexers, h, "a", logs);
  fail = true;
  await index(indexers, h, "a", logs);
  assert.equal(h.calls, 2, "one call per event, no retry");
  assert.deepEqual(values(indexers, "k"), ["a"], "the stale value stays");
  const arbitrary = logs.find((e) => e.message.includes("failed; keeping the previous values"));
  assert.ok(arbitrary?.error instanceof Error, "logged with the error (its stack)");

  const brief = handler(() => {
    throw new PermanentError("no");
  });
  const logs2: LogEntry[] = [];
  await index(new Indexers(["idx"]), brief, "b", logs2);
  const line = logs2.find((e) => e.message.includes("failed permanently: no"));
  assert.ok(line, "one brief line");
  assert.equal(line.error, undefined, "without a stack trace");
});

Deno.test("indices: a PermanentError removes the object's values and excludes it for good (HK-IDX-12)", async () => {
  let mode: "ok" | "permanent" = "ok";
  const h = handler((uid) => {
    if (mode === "permanent") throw new PermanentError("never");
    return { k: uid };
  });
  const indexers = new Indexers(["idx"]);
  await index(indexers, h, "a");
  mode = "permanent";
  await index(indexers, h, "a");
  assert.deepEqual(values(indexers, "k"), [], "removed");
  mode = "ok";
  await index(indexers, h, "a");
  assert.equal(h.calls, 2, "excluded: not called again");
  assert.deepEqual(values(indexers, "k"), []);
});

Deno.test("indices: a TemporaryError removes the object's values and excludes it for its delay only (HK-IDX-13)", async () => {
  let mode: "ok" | "temporary" = "ok";
  const h = handler((uid) => {
    if (mode === "temporary") throw new TemporaryError("later", { delay: 0.3 });
    return { k: uid };
  });
  const indexers = new Indexers(["idx"]);
  await index(indexers, h, "a");
  mode = "temporary";
  await index(indexers, h, "a");
  assert.deepEqual(values(indexers, "k"), [], "removed");
  mode = "ok";
  await index(indexers, h, "a");
  assert.equal(h.calls, 2, "excluded during the delay");
  await new Promise((resolve) => setTimeout(resolve, 350));
  await index(indexers, h, "a");
  assert.equal(h.calls, 3, "indexed again after the delay");
  assert.deepEqual(values(indexers, "k"), ["a"]);
});
