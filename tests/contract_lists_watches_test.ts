/**
 * Contract tests of reading, on the emulator and the real API server alike (the runner:
 * tests/_contract.ts): consistent list pagination, label and field selectors (value sets with
 * empty places, Events by `involvedObject`), watches from the initial state or a resourceVersion
 * with selectors, bookmarks, and 410 Gone for watches and continue tokens after compaction.
 */

import assert from "node:assert/strict";
import { ApiError } from "../core/client/errors.ts";
import { EVENTS_RESOURCE, postEvent } from "../core/client/events.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { collect, contract, failure, stopEmulatorLast, summary } from "./_contract.ts";
import { CONFIGMAPS, NAMESPACES, PODTEMPLATES } from "./_support.ts";

const SECRETS: Resource = { ...CONFIGMAPS, plural: "secrets", singular: "secret", kind: "Secret" };

contract(
  "list pagination is consistent; label and field selectors",
  async ({ client, namespace }) => {
    const tier = (i: number) => ["a", "b", "c"][i % 3]!;
    for (let i = 0; i < 25; i++) {
      const labels: Record<string, string> = { tier: tier(i), ...(i % 2 ? { odd: "" } : {}) };
      await client.api.create(SECRETS, {
        metadata: { name: `s-${String(i).padStart(2, "0")}`, labels },
      }, { namespace });
    }
    const pages: KubeObject[][] = [];
    const versions = new Set<string>();
    let first = true;
    for await (const page of client.api.listPages(SECRETS, { namespace, limit: 10 })) {
      pages.push(page.items);
      versions.add(page.metadata!.resourceVersion!);
      if (first) {
        first = false;
        assert.equal((page.metadata as { remainingItemCount?: number }).remainingItemCount, 15);
        await client.api.delete(SECRETS, "s-15", { namespace });
        await client.api.create(SECRETS, { metadata: { name: "s-99" } }, { namespace });
      }
    }
    assert.deepEqual(pages.map((p) => p.length), [10, 10, 5]);
    const names = pages.flat().map((o) => o.metadata?.name);
    assert.ok(
      names.includes("s-15") && !names.includes("s-99"),
      "later pages show the first page's snapshot",
    );
    assert.equal(versions.size, 1);
    assert.deepEqual(names, [...names].sort());

    const count = async (labelSelector?: string, fieldSelector?: string) =>
      (await client.api.list(SECRETS, { namespace, labelSelector, fieldSelector })).items.length;
    const now = Array.from({ length: 25 }, (_, i) => i).filter((i) => i !== 15);
    const expect = (p: (i: number) => boolean) => now.filter(p).length + (p(99) ? 0 : 0);
    assert.equal(await count("tier=a"), expect((i) => tier(i) === "a"));
    assert.equal(await count("tier==b"), expect((i) => tier(i) === "b"));
    assert.equal(await count("tier!=a"), expect((i) => tier(i) !== "a") + 1);
    assert.equal(await count("tier in (a,b)"), expect((i) => tier(i) !== "c"));
    assert.equal(await count("tier notin (a)"), expect((i) => tier(i) !== "a") + 1);
    assert.equal(await count("odd"), expect((i) => i % 2 === 1));
    assert.equal(await count("!odd"), expect((i) => i % 2 === 0) + 1);
    assert.equal(await count("tier=a,odd"), expect((i) => tier(i) === "a" && i % 2 === 1));
    assert.equal(await count(undefined, "metadata.name=s-01"), 1);
    assert.equal(await count(undefined, "metadata.name!=s-01"), 24);
    assert.equal(await count(undefined, `metadata.namespace=${namespace}`), 25);
    await failure(
      client.api.list(SECRETS, { namespace, labelSelector: "tier in (a" }),
      400,
      "BadRequest",
    );
    await failure(
      client.api.list(SECRETS, { namespace, fieldSelector: "spec.nope=1" }),
      400,
      "BadRequest",
    );
  },
);

contract(
  "label selector value sets: `()` and empty places mean the empty value",
  async ({ client, namespace }) => {
    const labelled: Array<[string, Record<string, string>]> = [
      ["none", {}],
      ["empty", { a: "" }],
      ["ax", { a: "x" }],
      ["ay", { a: "y" }],
    ];
    for (const [name, labels] of labelled) {
      await client.api.create(CONFIGMAPS, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, labels: { set: "1", ...labels } },
      }, { namespace });
    }
    const names = async (selector: string) =>
      (await client.api.list(CONFIGMAPS, { namespace, labelSelector: `set,${selector}` })).items
        .map((o) => o.metadata?.name).sort();
    assert.deepEqual(await names("a notin ()"), ["ax", "ay", "none"]);
    assert.deepEqual(await names("a in ()"), ["empty"]);
    assert.deepEqual(await names("a in (x,)"), ["ax", "empty"]);
    assert.deepEqual(await names("a in (x,y)"), ["ax", "ay"]);
    await failure(client.api.list(CONFIGMAPS, { namespace, labelSelector: "a in (x" }), 400);
  },
);

contract("Events by involvedObject field selectors", async ({ client, namespace }) => {
  const [one, two] = await Promise.all(
    ["one", "two"].map((name) =>
      client.api.create(CONFIGMAPS, { apiVersion: "v1", kind: "ConfigMap", metadata: { name } }, {
        namespace,
      })
    ),
  );
  for (const cm of [one!, two!]) {
    await postEvent(client.api, { ...cm, apiVersion: "v1", kind: "ConfigMap" }, {
      type: "Normal",
      reason: "Tested",
      message: `about ${cm.metadata?.name}`,
    });
  }
  const by = async (fieldSelector: string) =>
    (await client.api.list(EVENTS_RESOURCE, { namespace, fieldSelector })).items;
  const mine = await by(`involvedObject.uid=${one!.metadata!.uid}`);
  assert.deepEqual(mine.map((e) => e.message), ["about one"]);
  assert.equal((await by("involvedObject.name=two")).length, 1);
  assert.equal((await by("involvedObject.kind=ConfigMap,reason=Tested")).length, 2);
  assert.equal((await by("type=Warning")).length, 0);
  await failure(by("involvedObject.nope=x"), 400, "BadRequest");
});

contract(
  "watch: initial state, resumption from a resourceVersion, selectors",
  async ({ client, namespace }) => {
    const a = await client.api.create(CONFIGMAPS, { metadata: { name: "a" } }, { namespace });
    await client.api.create(CONFIGMAPS, { metadata: { name: "b" } }, { namespace });
    await client.api.patch(CONFIGMAPS, "a", { data: { k: "v" } }, { namespace });
    const resumed = await collect(
      await client.api.watch(CONFIGMAPS, {
        namespace,
        resourceVersion: a.metadata!.resourceVersion,
        allowBookmarks: false,
      }),
      (e) => e.length >= 2,
    );
    assert.deepEqual(summary(resumed), ["ADDED b", "MODIFIED a"]);
    assert.equal(resumed[1]!.object.kind, "ConfigMap");

    const initial = await client.api.watch(CONFIGMAPS, { namespace, allowBookmarks: false });
    const c = client.api.create(CONFIGMAPS, { metadata: { name: "c" } }, { namespace });
    const fresh = await collect(initial, (e) => e.some((x) => x.object.metadata?.name === "c"));
    await c;
    assert.deepEqual(summary(fresh).sort(), ["ADDED a", "ADDED b", "ADDED c"]);

    const from = (await client.api.list(CONFIGMAPS, { namespace })).resourceVersion;
    const selected = await client.api.watch(CONFIGMAPS, {
      namespace,
      resourceVersion: from,
      labelSelector: "w=1",
      allowBookmarks: false,
    });
    await client.api.patch(CONFIGMAPS, "b", { metadata: { labels: { w: "1" } } }, { namespace });
    await client.api.patch(CONFIGMAPS, "b", { data: { x: "y" } }, { namespace });
    await client.api.patch(CONFIGMAPS, "b", { metadata: { labels: { w: "2" } } }, { namespace });
    await client.api.delete(CONFIGMAPS, "b", { namespace });
    await client.api.create(CONFIGMAPS, { metadata: { name: "d", labels: { w: "1" } } }, {
      namespace,
    });
    const events = await collect(selected, (e) => e.some((x) => x.object.metadata?.name === "d"));
    assert.deepEqual(summary(events), ["ADDED b", "MODIFIED b", "DELETED b", "ADDED d"]);
  },
);

contract("bookmarks before the watch timeout, when there is progress", async (ctx) => {
  const { client, namespace } = ctx;
  const { resourceVersion } = await client.api.list(CONFIGMAPS, { namespace });
  const started = Date.now();
  const idle = await collect(
    await client.api.watch(CONFIGMAPS, { namespace, resourceVersion, timeoutSeconds: 3 }),
    () => false,
  );
  // Without progress no bookmark comes. On the shared real control plane other writers (leases,
  // other tests) may move the version on meanwhile: then a bookmark may come, but only beyond it.
  for (const event of idle) {
    assert.equal(event.type, "BOOKMARK", `only bookmarks on an idle watch: ${summary(idle)}`);
    const version = Number(event.object.metadata?.resourceVersion);
    assert.ok(version > Number(resourceVersion), `no progress, no bookmark: ${summary(idle)}`);
  }
  assert.ok(Date.now() - started >= 2_500, "the server ended the stream after ~3 s");
  const response = await client.api.watch(CONFIGMAPS, {
    namespace,
    resourceVersion,
    timeoutSeconds: 4,
  });
  // A change elsewhere moves the resource's version on without an event for this watch.
  const elsewhere = await ctx.backend.createNamespace("contract-other");
  await client.api.create(CONFIGMAPS, { metadata: { name: "elsewhere" } }, {
    namespace: elsewhere,
  });
  const events = await collect(response, () => false);
  const bookmark = events.find((e) => e.type === "BOOKMARK");
  assert.ok(bookmark, `a bookmark arrived: ${summary(events)}`);
  assert.equal(bookmark.object.kind, "ConfigMap");
  assert.ok(Number(bookmark.object.metadata?.resourceVersion) > Number(resourceVersion));
  await client.api.delete(NAMESPACES, elsewhere);
});

contract(
  "410 Gone after compaction: watches and continue tokens",
  async ({ backend, client, namespace }) => {
    const body = (name: string) => ({
      metadata: { name },
      template: { spec: { containers: [{ name: "c", image: "busybox" }] } },
    });
    const first = await client.api.create(PODTEMPLATES, body("pt-1"), { namespace });
    await client.api.create(PODTEMPLATES, body("pt-2"), { namespace });
    await client.api.create(PODTEMPLATES, body("pt-3"), { namespace });
    const pages = client.api.listPages(PODTEMPLATES, { namespace, limit: 1 });
    const page = await pages.next();
    assert.ok(!page.done && page.value.metadata?.continue);
    await backend.compact();
    await client.api.create(PODTEMPLATES, body("pt-4"), { namespace });
    const gone = await client.api.watch(PODTEMPLATES, {
      namespace,
      resourceVersion: first.metadata!.resourceVersion,
    })
      .then((r) => collect(r, (e) => e.length > 0), (e) => e);
    if (gone instanceof ApiError) assert.equal(gone.code, 410);
    else {
      assert.equal(gone[0]?.type, "ERROR", summary(gone).join());
      assert.deepEqual([gone[0]!.object.code, gone[0]!.object.reason], [410, "Expired"]);
    }
    await failure(pages.next(), 410, "Expired");
  },
);

stopEmulatorLast();
