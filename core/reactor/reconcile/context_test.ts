import assert from "node:assert/strict";
import { KubeClient } from "../../client/client.ts";
import { NO_CREDENTIALS } from "../../client/connection.ts";
import { Logger } from "../../actions/loggers.ts";
import { Index } from "../../engines/runners/indexing.ts";
import type { CacheReader, ReconcileContext } from "../../intents/reconciliation.ts";
import { createSettings } from "../../settings/settings.ts";
import { Patch } from "../../structs/patches.ts";
import type { Resource } from "../../structs/resources.ts";
import { reconcileContext } from "./context.ts";

const RESOURCE: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  namespaced: true,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

Deno.test("reconcileContext(): the body's fields, and the indices by name winning over the built-in names, as for cause handlers", () => {
  const byTier = new Index(), labels = new Index();
  const ctx = reconcileContext({
    metadata: { name: "a", namespace: "ns", uid: "u", labels: { tier: "web" } },
    spec: { size: 1 },
  }, {
    resource: RESOURCE,
    patch: new Patch(),
    logger: new Logger(["kopf", "test"]),
    memo: {},
    param: "p",
    settings: createSettings(),
    indices: { byTier, labels },
    deleting: false,
    retry: 0,
    signal: new AbortController().signal,
    cache: {} as CacheReader,
    client: new KubeClient({
      server: "https://127.0.0.1:1",
      credentials: NO_CREDENTIALS,
      source: "test",
    }),
    apply: (() => Promise.resolve(undefined)) as unknown as ReconcileContext["apply"],
  }) as ReconcileContext & Record<string, unknown>;
  assert.deepEqual(ctx.spec, { size: 1 });
  assert.equal(ctx.name, "a");
  assert.equal(ctx.param, "p");
  assert.equal(ctx["byTier"], byTier);
  assert.equal(ctx.indices["byTier"], byTier);
  assert.equal(ctx.labels, labels, "an index named like a built-in wins");
});
