/**
 * The client against the real control plane: CRUD, /status, pagination, watch resumption,
 * bookmarks, 410 Gone recovery, stalls, discovery, Events and request counting.
 */

import assert from "node:assert/strict";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import { ApiError } from "../core/client/errors.ts";
import { postEvent } from "../core/client/events.ts";
import {
  type ObjectEvent,
  objectEvents,
  watcher,
  type WatcherEvent,
} from "../core/client/watching.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  applyCrdObjects,
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  PausableTcpProxy,
  PODTEMPLATES,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const WIDGETS: Resource = {
  ...KOPFEXAMPLES,
  group: "tests.kopf.dev",
  plural: "widgets",
  singular: "widget",
  kind: "Widget",
  shortNames: ["wdg"],
  categories: ["kopftests"],
  subresources: ["status"],
};

function widgetCrd(plural = "widgets", kind = "Widget", shortName = "wdg"): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.tests.kopf.dev` },
    spec: {
      group: "tests.kopf.dev",
      scope: "Namespaced",
      names: {
        plural,
        singular: plural.slice(0, -1),
        kind,
        shortNames: [shortName],
        categories: ["kopftests"],
      },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      }],
    },
  };
}

Deno.test("CRUD on the example CRD, with preconditions and typed errors", opts, async () => {
  using client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace("crud");
  const body = {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "ex1" },
    spec: { duration: "1m" },
  };
  const created = await client.api.create(KOPFEXAMPLES, body, { namespace });
  assert.equal(created.metadata?.namespace, namespace);
  assert.ok(created.metadata?.uid);

  const dup = await client.api.create(KOPFEXAMPLES, body, { namespace }).catch((e) => e);
  assert.ok(dup instanceof ApiError);
  assert.equal(dup.code, 409);
  assert.equal(dup.reason, "AlreadyExists");

  const merged = await client.api.patch(KOPFEXAMPLES, "ex1", {
    spec: { field: "x" },
    status: { a: 1 },
  }, { namespace });
  assert.deepEqual(merged.spec, { duration: "1m", field: "x" });
  assert.deepEqual(merged.status, { a: 1 }); // no status subresource: status is part of the object

  const jsonPatched = await client.api.patch(KOPFEXAMPLES, "ex1", [
    { op: "test", path: "/spec/field", value: "x" },
    { op: "add", path: "/metadata/finalizers", value: ["kopf.zalando.org/KopfFinalizerMarker"] },
  ], { namespace, type: "json" });
  assert.deepEqual(jsonPatched.metadata?.finalizers, ["kopf.zalando.org/KopfFinalizerMarker"]);

  const failedTest = await client.api.patch(KOPFEXAMPLES, "ex1", [{
    op: "test",
    path: "/spec/field",
    value: "y",
  }], {
    namespace,
    type: "json",
  }).catch((e) => e);
  assert.ok(failedTest instanceof ApiError);
  assert.equal(failedTest.code, 422);

  const wrongUid = await client.api.delete(KOPFEXAMPLES, "ex1", {
    namespace,
    preconditions: { uid: "nope" },
  })
    .catch((e) => e);
  assert.ok(wrongUid instanceof ApiError);
  assert.equal(wrongUid.code, 409);

  const deleting = await client.api.delete(KOPFEXAMPLES, "ex1", {
    namespace,
    preconditions: { uid: created.metadata!.uid! },
    propagationPolicy: "Background",
  });
  assert.ok(
    (deleting.metadata as { deletionTimestamp?: string }).deletionTimestamp,
    "finalizer keeps it",
  );
  await client.api.patch(KOPFEXAMPLES, "ex1", { metadata: { finalizers: null } }, { namespace });
  const gone = await client.api.get(KOPFEXAMPLES, "ex1", { namespace }).catch((e) => e);
  assert.ok(gone instanceof ApiError);
  assert.equal(gone.code, 404);
  assert.equal(gone.reason, "NotFound");
  assert.match(
    gone.message,
    /^NotFound \(404\): .*"ex1" not found \[GET \/apis\/kopf.dev\/v1\/namespaces\/crud-/,
  );
});

Deno.test("/status subresource: status is written only through /status", opts, async () => {
  using client = await testClient();
  await applyCrdObjects(client, [widgetCrd()]);
  const namespace = await testNamespace("status");
  await client.api.create(WIDGETS, {
    apiVersion: "tests.kopf.dev/v1",
    kind: "Widget",
    metadata: { name: "w" },
    spec: { a: 1 },
  }, {
    namespace,
  });
  const main = await client.api.patch(WIDGETS, "w", { spec: { a: 2 }, status: { ignored: true } }, {
    namespace,
  });
  assert.equal(main.status, undefined);
  assert.equal(main.metadata?.generation, 2);
  const status = await client.api.patch(WIDGETS, "w", { status: { ok: true }, spec: { a: 3 } }, {
    namespace,
    subresource: "status",
  });
  assert.deepEqual(status.status, { ok: true });
  assert.deepEqual(status.spec, { a: 2 }, "spec changes through /status are ignored");
  assert.equal(status.metadata?.generation, 2, "status writes do not bump the generation");
});

Deno.test(
  "list paginates over a few hundred objects, with exact request counts",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("page");
    const writes = [];
    for (let i = 0; i < 300; i++) {
      writes.push(
        client.api.create(CONFIGMAPS, {
          metadata: { name: `cm-${i}`, labels: { n: String(i % 2) } },
        }, { namespace }),
      );
    }
    await Promise.all(writes);
    const before = client.counters.snapshot();
    const { items, resourceVersion } = await client.api.list(CONFIGMAPS, { namespace, limit: 70 });
    const names = new Set(items.map((cm) => cm.metadata?.name).filter((n) => n?.startsWith("cm-")));
    assert.equal(names.size, 300);
    assert.ok(resourceVersion);
    const used = client.counters.since(before);
    assert.equal(
      used.count({ verb: "list", resource: "configmaps", code: 200 }),
      Math.ceil(items.length / 70),
    );
    const odd = await client.api.list(CONFIGMAPS, { namespace, labelSelector: "n=1" });
    assert.equal(odd.items.length, 150, "label selectors are applied by the server");
  },
);

Deno.test("watch resumes from a resourceVersion without repeating history", opts, async () => {
  using client = await testClient();
  const namespace = await testNamespace("resume");
  const a = await client.api.create(CONFIGMAPS, { metadata: { name: "a" } }, { namespace });
  await client.api.create(CONFIGMAPS, { metadata: { name: "b" } }, { namespace });
  await client.api.patch(CONFIGMAPS, "a", { data: { k: "v" } }, { namespace });
  const controller = new AbortController();
  const response = await client.api.watch(CONFIGMAPS, {
    namespace,
    resourceVersion: a.metadata!.resourceVersion!,
    signal: controller.signal,
  });
  const lines: Array<{ type: string; object: KubeObject }> = [];
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  while (lines.length < 2) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    const parts = buffer.split("\n");
    buffer = parts.pop()!;
    for (const p of parts) {
      // The controller manager adds kube-root-ca.crt to new namespaces at its own pace.
      const event = p.trim() ? JSON.parse(p) : undefined;
      if (event && event.object?.metadata?.name !== "kube-root-ca.crt") lines.push(event);
    }
  }
  controller.abort();
  await reader.cancel().catch(() => {});
  assert.deepEqual(lines.map((e) => [e.type, e.object.metadata?.name]), [["ADDED", "b"], [
    "MODIFIED",
    "a",
  ]]);
});

Deno.test("watcher receives bookmarks and follows changes", opts, async () => {
  using client = await testClient();
  const namespace = await testNamespace("bookmark");
  const controller = new AbortController();
  const stream = watcher(client.api, CONFIGMAPS, {
    namespace,
    serverTimeoutSeconds: 4,
    signal: controller.signal,
  });
  const seen: WatcherEvent[] = [];
  let created = false;
  for await (const event of stream) {
    seen.push(event);
    if (event.type === "initDone" && !created) {
      created = true;
      await client.api.create(CONFIGMAPS, { metadata: { name: "x" } }, { namespace });
    }
    const applied = seen.some((e) => e.type === "apply" && e.object.metadata?.name === "x");
    if (applied && seen.some((e) => e.type === "bookmark")) break;
  }
  controller.abort();
  assert.equal(seen[0]?.type, "init");
  assert.ok(
    seen.some((e) => e.type === "bookmark"),
    "a bookmark arrived before the server timeout",
  );
});

Deno.test(
  "410 Gone after etcd compaction is followed by a relist that loses no change",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    using direct = await testClient();
    const namespace = await testNamespace("gone");
    await direct.api.create(PODTEMPLATES, podTemplate("keep"), { namespace });
    await direct.api.create(PODTEMPLATES, podTemplate("doomed"), { namespace });
    await using proxy = PausableTcpProxy.inFrontOf(direct);
    using client = proxy.client(direct);
    const controller = new AbortController();
    const lists: WatcherEvent[] = [];
    const events = objectEvents(
      watcher(client.api, PODTEMPLATES, {
        namespace,
        inactivityTimeoutMs: 1500,
        signal: controller.signal,
      }),
      (e) => e.type === "init" && lists.push(e),
    );
    const seen: ObjectEvent[] = [];
    let phase = 0;
    for await (const event of events) {
      seen.push(event);
      if (phase === 0 && seen.length === 2) {
        phase = 1;
        // Cut the watch off, change things behind its back, and compact the history away.
        proxy.pause();
        await direct.api.delete(PODTEMPLATES, "doomed", { namespace });
        await direct.api.create(PODTEMPLATES, podTemplate("born"), { namespace });
        await direct.api.patch(PODTEMPLATES, "keep", { metadata: { labels: { changed: "yes" } } }, {
          namespace,
        });
        for (let i = 0; i < 3; i++) {
          await direct.api.create(
            PODTEMPLATES,
            podTemplate(`filler-${i}`),
            { namespace },
          );
        }
        await plane.compact();
        proxy.resume();
      }
      const names = (type: string) =>
        seen.slice(2).filter((e) => e.type === type).map((e) => e.object.metadata?.name);
      if (
        names("delete").includes("doomed") && names("apply").includes("born") &&
        names("apply").includes("keep")
      ) break;
    }
    controller.abort();
    assert.deepEqual(seen.slice(0, 2).map((e) => e.type), ["apply", "apply"]);
    const after = seen.slice(2);
    assert.ok(
      after.some((e) => e.type === "delete" && e.object.metadata?.name === "doomed"),
      "deletion seen",
    );
    const keep = after.find((e) => e.type === "apply" && e.object.metadata?.name === "keep");
    assert.equal(keep?.object.metadata?.labels?.changed, "yes");
    assert.equal(lists.length, 2, "the 410 caused exactly one relist");
  },
);

function podTemplate(name: string): KubeObject {
  return {
    metadata: { name },
    template: { spec: { containers: [{ name: "c", image: "busybox" }] } },
  };
}

Deno.test(
  "watcher cuts each watch request after clientTimeout and resumes it without a relist or a lost event (CFG-42)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("clienttimeout");
    const controller = new AbortController();
    const deadline = setTimeout(() => controller.abort(), 60_000);
    const stream = watcher(client.api, CONFIGMAPS, {
      namespace,
      serverTimeoutSeconds: 300, // so every reconnection is the client's doing
      clientTimeoutMs: 700,
      reconnectBackoffMs: 0,
      signal: controller.signal,
    });
    const names = Array.from({ length: 25 }, (_, i) => `cm-${i}`);
    const applied: string[] = [];
    const seen: WatcherEvent[] = [];
    let creating: Promise<void> | undefined;
    for await (const event of stream) {
      seen.push(event);
      if (event.type === "initDone") {
        // Created over about 3 s, so that several cuts fall in between.
        creating = (async () => {
          for (const name of names) {
            await client.api.create(CONFIGMAPS, { metadata: { name } }, { namespace });
            await new Promise((resolve) => setTimeout(resolve, 120));
          }
        })();
      }
      const name = event.type === "apply" ? event.object.metadata?.name : undefined;
      if (name?.startsWith("cm-")) applied.push(name);
      if (applied.length >= names.length) break;
    }
    clearTimeout(deadline);
    controller.abort();
    await creating;
    assert.deepEqual(applied.toSorted(), names.toSorted(), "each creation seen exactly once");
    assert.equal(seen.filter((e) => e.type === "init").length, 1, "no relist");
    assert.deepEqual(seen.filter((e) => e.type === "error"), [], "a cut is no error");
    const connections = seen.filter((e) => e.type === "connected").length;
    assert.ok(connections >= 3, `the watch was cut and resumed (${connections} connections)`);
  },
);

Deno.test("a stalled watch stream is detected and recovered", opts, async () => {
  using direct = await testClient();
  const namespace = await testNamespace("stall");
  await using proxy = PausableTcpProxy.inFrontOf(direct);
  using client = proxy.client(direct);
  const controller = new AbortController();
  const stalls: WatcherEvent[] = [];
  const stream = watcher(client.api, CONFIGMAPS, {
    namespace,
    inactivityTimeoutMs: 1000,
    signal: controller.signal,
  });
  let step = 0;
  for await (const event of stream) {
    if (event.type === "initDone" && step === 0) {
      step = 1;
      proxy.pause();
      await direct.api.create(CONFIGMAPS, { metadata: { name: "during-stall" } }, { namespace });
    }
    if (event.type === "error") {
      stalls.push(event);
      proxy.resume();
    }
    if (event.type === "apply" && event.object.metadata?.name === "during-stall") break;
  }
  controller.abort();
  assert.ok(stalls.length >= 1);
  const first = stalls[0];
  assert.match(first?.type === "error" ? first.error.message : "", /silent for 1000 ms/);
});

Deno.test(
  "discovery reports resources and follows CRDs appearing and going away",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const [ex] = await client.discovery.find((r) => r.plural === "kopfexamples");
    assert.ok(ex);
    assert.equal(ex.kind, "KopfExample");
    assert.deepEqual(ex.shortNames, ["kopfexes", "kopfex", "kexes", "kex"]);
    assert.equal(ex.namespaced, true);
    assert.ok(ex.verbs.includes("watch"));
    const [pods] = await client.discovery.find((r) => r.group === "" && r.plural === "pods");
    assert.ok(pods?.subresources.includes("status") && pods.subresources.includes("log"));
    assert.ok(pods?.categories.includes("all"));
    const [deployments] = await client.discovery.find((r) =>
      r.group === "apps" && r.plural === "deployments"
    );
    assert.ok(deployments?.preferred && deployments.subresources.includes("scale"));

    const controller = new AbortController();
    let changes = 0;
    client.discovery.onChange(() => changes++);
    const following = client.discovery.followDefinitions(controller.signal);
    try {
      const crd = widgetCrd("gadgets", "Gadget", "gdg");
      await applyCrdObjects(client, [crd]);
      await eventually(
        async () => (await client.discovery.resources()).some((r) => r.plural === "gadgets"),
        30_000,
        "gadgets in discovery",
      );
      await client.api.delete(CRD_RESOURCE, "gadgets.tests.kopf.dev");
      // No request of the test's own refreshes the catalogue: following the CRDs alone must.
      await eventually(
        async () => !(await client.discovery.resources()).some((r) => r.plural === "gadgets"),
        60_000,
        "gadgets gone from discovery",
      );
    } finally {
      controller.abort();
      await following;
    }
    assert.ok(changes >= 2);
  },
);

Deno.test("Events are posted about objects and visible by involvedObject", opts, async () => {
  using client = await testClient();
  const namespace = await testNamespace("events");
  const cm = await client.api.create(CONFIGMAPS, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "e" },
  }, {
    namespace,
  });
  await postEvent(client.api, { ...cm, apiVersion: "v1", kind: "ConfigMap" }, {
    type: "Normal",
    reason: "Logging",
    message: "Handler 'create_fn' succeeded.",
  });
  const events = await client.api.list({
    group: "",
    version: "v1",
    plural: "events",
    namespaced: true,
  }, {
    namespace,
    fieldSelector: `involvedObject.uid=${cm.metadata!.uid}`,
  });
  assert.equal(events.items.length, 1);
  assert.equal(events.items[0]!.reason, "Logging");
  assert.equal(events.items[0]!.message, "Handler 'create_fn' succeeded.");
  assert.equal(client.counters.count({ verb: "create", resource: "events", code: 201 }), 1);
});

Deno.test(
  "discovery learns of a CRD created between loading the catalogue and following CRDs",
  opts,
  async () => {
    using client = await testClient();
    await client.discovery.resources(); // the catalogue, loaded first (as an operator starts)
    const crd = widgetCrd("sprockets", "Sprocket", "spr");
    await applyCrdObjects(client, [crd]); // established before the following starts
    try {
      const controller = new AbortController();
      let changes = 0;
      client.discovery.onChange(() => changes++);
      const following = client.discovery.followDefinitions(controller.signal);
      // No later CRD event comes: only the first listing can reveal it.
      await eventually(() => changes > 0 || undefined, 15_000, "a refresh after the listing");
      assert.ok((await client.discovery.resources()).some((r) => r.plural === "sprockets"));
      controller.abort();
      await following;
    } finally {
      await client.api.delete(CRD_RESOURCE, "sprockets.tests.kopf.dev").catch(() => {});
    }
  },
);
