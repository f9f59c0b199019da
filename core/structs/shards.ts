/**
 * Virtual shards of the 64-bit hash space and the `shardSelector` expressions of server-side
 * sharded lists and watches (Kubernetes 1.36, feature gate `ShardedListAndWatch`).
 *
 * Shard `k` of `K` covers the hashes `h` with `floor(h × K / 2⁶⁴) = k`, i.e. the half-open range
 * `[ceil(k × 2⁶⁴ / K), ceil((k+1) × 2⁶⁴ / K))`; the hash is 64-bit FNV-1a of the object's uid (or
 * namespace), exactly as the API server computes it, so the client-side filter and the server
 * agree on every object. No I/O here.
 * @module
 */

import { fnv1a64 } from "../util/fnv1a.ts";
import type { KubeObject } from "./objects.ts";

/** What objects are sharded by: their uid (even spread) or their namespace (whole namespaces). */
export type ShardKey = "uid" | "namespace";

const SPACE = 1n << 64n;

/** The most virtual shards an operator may have. */
export const MAX_SHARDS = 4096;

/**
 * Checks a number of virtual shards.
 *
 * @param count The number of shards.
 * @throws {RangeError} when it is not an integer from 1 to {@link MAX_SHARDS}.
 */
export function checkShardCount(count: number): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_SHARDS) {
    throw new RangeError(
      `The number of shards must be an integer from 1 to ${MAX_SHARDS}, got ${count}`,
    );
  }
}

/**
 * The half-open hash range `[start, end)` of one shard.
 *
 * @param shard The shard's index, from 0.
 * @param count The number of shards.
 * @returns Its bounds; the last shard ends at 2⁶⁴.
 */
export function shardRange(shard: number, count: number): { start: bigint; end: bigint } {
  const bound = (k: number) => (BigInt(k) * SPACE + BigInt(count) - 1n) / BigInt(count);
  return { start: bound(shard), end: bound(shard + 1) };
}

/**
 * The shard of a 64-bit hash.
 *
 * @param hash The hash.
 * @param count The number of shards.
 * @returns The shard's index.
 */
export function shardOfHash(hash: bigint, count: number): number {
  return Number((hash * BigInt(count)) >> 64n);
}

/**
 * The key an object is sharded by. Cluster-scoped objects have no namespace, so they are always
 * sharded by uid (by namespace they would all land in one shard).
 *
 * @param key What the operator shards by.
 * @param namespaced Whether the resource is namespaced.
 * @returns The key to use for that resource.
 */
export function effectiveShardKey(key: ShardKey, namespaced: boolean): ShardKey {
  return namespaced ? key : "uid";
}

/**
 * The shard an object belongs to.
 *
 * @param object The object.
 * @param key What to hash: its uid or its namespace.
 * @param count The number of shards.
 * @returns The shard's index.
 */
export function shardOfObject(object: KubeObject, key: ShardKey, count: number): number {
  const value = key === "uid" ? object.metadata?.uid : object.metadata?.namespace;
  return shardOfHash(fnv1a64(value ?? ""), count);
}

function bound(value: bigint): string {
  return value >= SPACE ? "0x10000000000000000" : `0x${value.toString(16).padStart(16, "0")}`;
}

/**
 * The `shardSelector` of a set of shards: one `shardRange(...)` per run of adjacent shards,
 * joined with `||`, as the API server parses it.
 *
 * @param shards The shards' indices.
 * @param count The number of shards.
 * @param key What is hashed.
 * @returns The expression, e.g.
 *   `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`.
 * @throws {RangeError} when no shards are given (an empty selector is rejected by the server).
 */
export function shardSelector(shards: Iterable<number>, count: number, key: ShardKey): string {
  const sorted = [...new Set(shards)].sort((a, b) => a - b);
  if (!sorted.length) throw new RangeError("A shard selector needs at least one shard");
  const parts: string[] = [];
  let first = sorted[0]!;
  let last = first;
  const flush = () => {
    const start = shardRange(first, count).start;
    const end = shardRange(last, count).end;
    parts.push(`shardRange(object.metadata.${key}, '${bound(start)}', '${bound(end)}')`);
  };
  for (const shard of sorted.slice(1)) {
    if (shard === last + 1) last = shard;
    else {
      flush();
      first = last = shard;
    }
  }
  flush();
  return parts.join(" || ");
}

/**
 * A shard's range for people: `0x0000000000000000-0x0800000000000000`.
 *
 * @param shard The shard's index.
 * @param count The number of shards.
 * @returns The bounds in hex.
 */
export function describeShardRange(shard: number, count: number): string {
  const { start, end } = shardRange(shard, count);
  return `${bound(start)}-${bound(end)}`;
}

/** How objects are split into shards (all replicas of an operator must agree). */
export interface ShardSpace {
  /** The number of virtual shards. */
  readonly count: number;
  /** What is hashed. */
  readonly key: ShardKey;
  /** Send `shardSelector` to the server (it supports sharded watches). */
  readonly serverSide: boolean;
}
