import assert from "node:assert/strict";
import { fnv1a64 } from "../util/fnv1a.ts";
import {
  checkShardCount,
  effectiveShardKey,
  shardOfHash,
  shardOfObject,
  shardRange,
  shardSelector,
} from "./shards.ts";

Deno.test("shardRange() tiles the 64-bit space without gaps or overlaps", () => {
  for (const count of [1, 2, 3, 7, 32]) {
    let next = 0n;
    for (let k = 0; k < count; k++) {
      const { start, end } = shardRange(k, count);
      assert.equal(start, next);
      assert.ok(end > start);
      next = end;
    }
    assert.equal(next, 1n << 64n);
  }
});

Deno.test("shardOfHash() agrees with shardRange() at every bound", () => {
  for (const count of [3, 7, 32]) {
    for (let k = 0; k < count; k++) {
      const { start, end } = shardRange(k, count);
      assert.equal(shardOfHash(start, count), k);
      assert.equal(shardOfHash(end - 1n, count), k);
    }
  }
});

Deno.test("shardOfObject() hashes the uid, or the namespace", () => {
  const object = { metadata: { uid: "abc", namespace: "ns1" } };
  assert.equal(shardOfObject(object, "uid", 32), shardOfHash(fnv1a64("abc"), 32));
  assert.equal(shardOfObject(object, "namespace", 32), shardOfHash(fnv1a64("ns1"), 32));
  assert.equal(effectiveShardKey("namespace", false), "uid");
  assert.equal(effectiveShardKey("namespace", true), "namespace");
});

Deno.test("shardSelector() merges adjacent shards and uses the server's bound format", () => {
  assert.equal(
    shardSelector([0], 2, "uid"),
    "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
  );
  assert.equal(
    shardSelector([1, 0], 2, "uid"),
    "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
  );
  assert.equal(
    shardSelector([0, 2, 3], 4, "namespace"),
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || " +
      "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
  );
  assert.throws(() => shardSelector([], 4, "uid"), RangeError);
});

Deno.test("checkShardCount() rejects nonsense with a RangeError naming the value", () => {
  assert.throws(() => checkShardCount(0), /got 0/);
  assert.throws(() => checkShardCount(1.5), RangeError);
  checkShardCount(32);
});
