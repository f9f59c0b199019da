import assert from "node:assert/strict";
import type { KubeObject } from "../structs/objects.ts";
import { cm, CONFIGMAPS, until, withEmulator } from "./_test_support.ts";
import {
  type CacheEvent,
  CacheMissError,
  dropManagedFields,
  InformerCache,
  LAST_APPLIED_ANNOTATION,
} from "./caching.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test("dropManagedFields() drops managedFields and the kubectl last-applied annotation only", () => {
  const object: KubeObject = {
    metadata: {
      name: "x",
      managedFields: [{ manager: "kubectl" }],
      annotations: { [LAST_APPLIED_ANNOTATION]: "{}", keep: "me" },
    },
    data: { a: "1" },
  };
  assert.deepEqual(dropManagedFields(object), {
    metadata: { name: "x", annotations: { keep: "me" } },
    data: { a: "1" },
  });
  const plain: KubeObject = { metadata: { name: "y" } };
  assert.equal(dropManagedFields(plain), plain, "untouched objects are not copied");
});

Deno.test("InformerCache lists once, then answers get/list with no API request", opts, async () => {
  await withEmulator(async (client) => {
    await client.api.create(CONFIGMAPS, cm("a", { k: "1" }), { namespace: "default" });
    await client.api.create(CONFIGMAPS, cm("b", {}, { labels: { app: "x" } }), {
      namespace: "default",
    });
    await using cache = new InformerCache(client.api);
    const informer = cache.informer(CONFIGMAPS, { namespace: "default" });
    assert.equal(cache.informer(CONFIGMAPS, { namespace: "default" }), informer, "shared");
    await informer.ready;
    const before = client.counters.count({ verb: ["get", "list"] });
    assert.deepEqual(cache.get(CONFIGMAPS, "a", { namespace: "default" })?.data, { k: "1" });
    assert.equal(cache.get(CONFIGMAPS, "zzz", { namespace: "default" }), undefined);
    assert.deepEqual(
      cache.list(CONFIGMAPS, { namespace: "default", labels: { app: "x" } }).map((o) =>
        o.metadata?.name
      ),
      ["b"],
    );
    assert.equal(client.counters.count({ verb: ["get", "list"] }), before, "no request");
    assert.equal(client.counters.count({ verb: "list", resource: "configmaps" }), 1);
    assert.throws(() => cache.get(CONFIGMAPS, "a", { namespace: "elsewhere" }), CacheMissError);
    const cached = cache.get(CONFIGMAPS, "a", { namespace: "default" })!;
    assert.throws(() => (cached.data as Record<string, string>).k = "2", TypeError, "read-only");
  });
});

Deno.test(
  "InformerCache tells subscribers of changes and deletions with the previous object",
  opts,
  async () => {
    await withEmulator(async (client) => {
      await using cache = new InformerCache(client.api);
      const informer = cache.informer(CONFIGMAPS, { namespace: "default" });
      await informer.ready;
      const events: CacheEvent[] = [];
      informer.subscribe((e) => events.push(e));
      await client.api.create(CONFIGMAPS, cm("a", { k: "1" }), { namespace: "default" });
      await client.api.patch(CONFIGMAPS, "a", { data: { k: "2" } }, { namespace: "default" });
      await client.api.delete(CONFIGMAPS, "a", { namespace: "default" });
      await until(() => events.length === 3, `3 events, got ${events.length}`);
      assert.deepEqual(events.map((e) => [e.type, e.object.data, e.old?.data]), [
        ["apply", { k: "1" }, undefined],
        ["apply", { k: "2" }, { k: "1" }],
        ["delete", { k: "2" }, { k: "2" }],
      ]);
      assert.equal(cache.get(CONFIGMAPS, "a", { namespace: "default" }), undefined);
    });
  },
);

Deno.test(
  "InformerCache stores the operator's own writes at once and ignores their echo (read-your-writes)",
  opts,
  async () => {
    await withEmulator(async (client) => {
      await client.api.create(CONFIGMAPS, cm("a", { k: "1" }), { namespace: "default" });
      await using cache = new InformerCache(client.api);
      const informer = cache.informer(CONFIGMAPS, { namespace: "default" });
      await informer.ready;
      const events: CacheEvent[] = [];
      informer.subscribe((e) => events.push(e));
      const written = await client.api.patch(CONFIGMAPS, "a", { data: { k: "2" } }, {
        namespace: "default",
      });
      cache.observe(CONFIGMAPS, written);
      assert.deepEqual(cache.get(CONFIGMAPS, "a", { namespace: "default" })?.data, { k: "2" });
      await client.api.patch(CONFIGMAPS, "a", { data: { k: "3" } }, { namespace: "default" });
      await until(() => events.length >= 2, "the later change arrives");
      assert.deepEqual(events.map((e) => e.object.data), [{ k: "2" }, { k: "3" }], "no echo");
    });
  },
);

Deno.test(
  "InformerCache drops managedFields and last-applied annotations by default, keeps them with transform: false",
  opts,
  async () => {
    await withEmulator(async (client) => {
      await client.api.create(
        CONFIGMAPS,
        cm("a", {}, { annotations: { [LAST_APPLIED_ANNOTATION]: '{"big":1}', keep: "1" } }),
        { namespace: "default" },
      );
      await using slim = new InformerCache(client.api);
      await slim.informer(CONFIGMAPS, { namespace: "default" }).ready;
      assert.deepEqual(slim.get(CONFIGMAPS, "a", { namespace: "default" })?.metadata?.annotations, {
        keep: "1",
      });
      await using whole = new InformerCache(client.api, { transform: false });
      await whole.informer(CONFIGMAPS, { namespace: "default" }).ready;
      assert.equal(
        whole.get(CONFIGMAPS, "a", { namespace: "default" })?.metadata?.annotations?.[
          LAST_APPLIED_ANNOTATION
        ],
        '{"big":1}',
      );
    });
  },
);
