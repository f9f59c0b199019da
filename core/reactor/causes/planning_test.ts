import assert from "node:assert/strict";
import type { Resource } from "../../structs/resources.ts";
import { planStreams, type StreamScope } from "./planning.ts";
import type { ServedResource } from "../streams/resolving.ts";

function resource(plural: string, namespaced: boolean): Resource {
  return {
    group: "kopf.dev",
    version: "v1",
    plural,
    singular: plural.slice(0, -1),
    kind: plural,
    namespaced,
    verbs: ["list", "watch"],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
  };
}

const KEX = resource("kopfexamples", true);
const CLUSTERED = resource("clusterthings", false);

function scope(overrides: Partial<StreamScope>): StreamScope {
  const served = new Map<string, ServedResource>([
    ["kopfexamples.v1.kopf.dev", { resource: KEX, selectors: new Set(["kex"]) }],
    ["clusterthings.v1.kopf.dev", { resource: CLUSTERED, selectors: new Set(["ct"]) }],
  ]);
  return {
    served,
    clusterwide: false,
    namespaces: ["ns1", "ns2"],
    shards: undefined,
    indexed: () => false,
    ...overrides,
  };
}

Deno.test("planStreams(): one stream per namespace; cluster-scoped resources once, cluster-wide", () => {
  const plan = planStreams(scope({}));
  assert.deepEqual([...plan.keys()], [
    "kopfexamples.v1.kopf.dev@ns1",
    "kopfexamples.v1.kopf.dev@ns2",
    "clusterthings.v1.kopf.dev@*",
  ]);
  const first = plan.get("kopfexamples.v1.kopf.dev@ns1")!;
  assert.equal(first.namespace, "ns1");
  assert.equal(first.role, "full");
  assert.equal(first.shard, undefined);
  assert.equal(plan.get("clusterthings.v1.kopf.dev@*")!.namespace, undefined);
});

Deno.test("planStreams(): cluster-wide operators watch every resource once", () => {
  const plan = planStreams(scope({ clusterwide: true }));
  assert.deepEqual([...plan.keys()], [
    "kopfexamples.v1.kopf.dev@*",
    "clusterthings.v1.kopf.dev@*",
  ]);
});

Deno.test("planStreams(): sharded: a stream per held shard, plus one index-only stream if indexed", () => {
  const plan = planStreams(scope({
    namespaces: ["ns1"],
    shards: new Set([3, 5]),
    indexed: (resource, selectors) => resource === KEX && selectors.has("kex"),
  }));
  assert.deepEqual(
    [...plan].map(([key, t]) => [key, t.role, t.shard]),
    [
      ["kopfexamples.v1.kopf.dev@ns1#index", "index", undefined],
      ["kopfexamples.v1.kopf.dev@ns1#3", "process", 3],
      ["kopfexamples.v1.kopf.dev@ns1#5", "process", 5],
      ["clusterthings.v1.kopf.dev@*#3", "process", 3],
      ["clusterthings.v1.kopf.dev@*#5", "process", 5],
    ],
  );
  // No shard held: only the index-only stream keeps the indices whole.
  const none = planStreams(scope({ namespaces: ["ns1"], shards: new Set(), indexed: () => true }));
  assert.deepEqual([...none.keys()], [
    "kopfexamples.v1.kopf.dev@ns1#index",
    "clusterthings.v1.kopf.dev@*#index",
  ]);
});

Deno.test("planStreams(): no namespace known yet: only cluster-scoped resources are watched", () => {
  const plan = planStreams(scope({ namespaces: [] }));
  assert.deepEqual([...plan.keys()], ["clusterthings.v1.kopf.dev@*"]);
});
