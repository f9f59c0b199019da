/**
 * Which watch streams should run: one per served resource × namespace (cluster-scoped resources
 * and cluster-wide operators: one per resource). Sharded replicas run one stream per held shard
 * instead, plus one unsharded stream that only indexes when the resource has index handlers
 * (indices hold all objects; handlers run on the owning replica only).
 *
 * Stream keys are `<resource>@<namespace or *>`, with `#index` or `#<shard>` when sharded; they
 * name the streams in diagnostics (see `Orchestrator.problems`).
 * @module
 */

import type { Resource } from "../../structs/resources.ts";
import type { ServedResource } from "../streams/resolving.ts";

/** What a stream does with its objects: everything, only handling, or only indexing. */
export type StreamRole = "full" | "process" | "index";

/** One stream to run. */
export interface StreamTarget {
  /** The watched resource. */
  readonly resource: Resource;
  /** The watched namespace, or undefined for cluster-wide. */
  readonly namespace: string | undefined;
  /** The selectors (by JSON key) that resolved to the resource. */
  readonly selectors: Set<string>;
  /** The shard whose objects it handles, or undefined when unsharded. */
  readonly shard: number | undefined;
  /** What it does with its objects. */
  readonly role: StreamRole;
}

/** What the plan is made of. */
export interface StreamScope {
  /** The resources to serve, by resource name. */
  readonly served: ReadonlyMap<string, ServedResource>;
  /** Watch cluster-wide. */
  readonly clusterwide: boolean;
  /** The namespaces served (ignored when cluster-wide). */
  readonly namespaces: Iterable<string>;
  /** The shards held, or undefined when the operator is not sharded. */
  readonly shards: Iterable<number> | undefined;
  /** Whether a resource has index handlers (via these selectors). */
  readonly indexed: (resource: Resource, selectors: ReadonlySet<string>) => boolean;
}

/**
 * The streams that should run now.
 * @param scope What is served, where, and which shards.
 * @returns The streams by key.
 */
export function planStreams(scope: StreamScope): Map<string, StreamTarget> {
  const wanted = new Map<string, StreamTarget>();
  const namespaced = [...scope.namespaces];
  const shards = scope.shards && [...scope.shards];
  for (const [id, { resource, selectors }] of scope.served) {
    const namespaces = scope.clusterwide || !resource.namespaced ? [undefined] : namespaced;
    for (const namespace of namespaces) {
      const base = `${id}@${namespace ?? "*"}`;
      if (!shards) {
        wanted.set(base, { resource, namespace, selectors, shard: undefined, role: "full" });
        continue;
      }
      if (scope.indexed(resource, selectors)) {
        wanted.set(`${base}#index`, {
          resource,
          namespace,
          selectors,
          shard: undefined,
          role: "index",
        });
      }
      for (const shard of shards) {
        wanted.set(`${base}#${shard}`, { resource, namespace, selectors, shard, role: "process" });
      }
    }
  }
  return wanted;
}
