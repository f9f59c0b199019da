import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import type { IndexingHandler } from "../../intents/handlers.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { Indexers } from "./indexing.ts";

const BODY: KubeObject = { metadata: { name: "pod1", namespace: "ns", uid: "u1" } };

/** An index handler whose next results are given one per call; an Error instance is thrown. */
function scripted(results: unknown[]): IndexingHandler {
  return {
    kind: "indexing",
    id: "idx",
    param: undefined,
    fn: () => {
      const next = results.shift();
      if (next instanceof Error) throw next;
      return next;
    },
  };
}

async function indexOnce(
  indexers: Indexers,
  handler: IndexingHandler,
  logs: LogEntry[] = [],
  deleted = false,
): Promise<void> {
  const logger = new Logger(["kopf", "test"], { listeners: [(e) => logs.push(e)] });
  await indexers.index(
    [handler],
    "u1",
    BODY,
    deleted,
    () => ({ body: BODY }) as unknown as ResourceContext,
    logger,
  );
}

function contents(indexers: Indexers): Array<[unknown, unknown[]]> {
  return indexers.indices.idx!.entries().map(([key, store]) => [key, store.toArray()]);
}

Deno.test("Indexers.index() keeps the existing values when a handler returns undefined or null (HK-IDX-09)", async () => {
  const handler = scripted([{ a: 1, b: 2 }, undefined, null, { a: 3 }]);
  const indexers = new Indexers(["idx"]);
  await indexOnce(indexers, handler);
  assert.deepEqual(contents(indexers), [["a", [1]], ["b", [2]]]);
  await indexOnce(indexers, handler); // undefined
  assert.deepEqual(contents(indexers), [["a", [1]], ["b", [2]]], "undefined is not indexed");
  await indexOnce(indexers, handler); // null
  assert.deepEqual(contents(indexers), [["a", [1]], ["b", [2]]], "null is not indexed");
  await indexOnce(indexers, handler); // a real result replaces everything of the object
  assert.deepEqual(contents(indexers), [["a", [3]]]);
});

Deno.test("Indexers.index() indexes a mapping with null values as usual (HK-IDX-09)", async () => {
  const handler = scripted([{ a: 1 }, { key: null }]);
  const indexers = new Indexers(["idx"]);
  await indexOnce(indexers, handler);
  await indexOnce(indexers, handler);
  assert.deepEqual(contents(indexers), [["key", [null]]]);
  assert.equal(indexers.indices.idx!.get("key")?.size, 1);
});

Deno.test("Indexers.index() keeps the existing values when an ignored error happens (HK-IDX-09)", async () => {
  const handler = scripted([{ a: 1 }, new Error("boom")]);
  const indexers = new Indexers(["idx"]);
  const logs: LogEntry[] = [];
  await indexOnce(indexers, handler, logs);
  await indexOnce(indexers, handler, logs);
  assert.deepEqual(contents(indexers), [["a", [1]]]);
  assert.ok(logs.some((e) => e.message.includes("keeping the previous values")), "logged");
  await indexOnce(indexers, handler, logs, true);
  assert.deepEqual(contents(indexers), [], "a deleted object leaves the index");
});
