/**
 * Contract tests: one suite of API behaviours, run against both the in-memory emulator
 * (`kits/emulator/`) and the real control plane (`sharedControlPlane()`) with the testing
 * fixture `testing/backend.ts`, so that the emulator's fidelity is proved rather than assumed.
 * Differences that remain are listed in docs/emulator.md. `KOPF_TS_TEST_BACKEND=emulator` (or
 * `plane`) runs one backend only; `KOPF_TS_CONTRACT_BACKENDS` (`emulator`, `real`) still works.
 */

import assert from "node:assert/strict";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import { APPLY_PATCH_CONTENT, ApplyConflictError, applyObject } from "../core/client/applying.ts";
import { ApiError } from "../core/client/errors.ts";
import { EVENTS_RESOURCE, postEvent } from "../core/client/events.ts";
import { type Lease, LEASES } from "../core/client/leases.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { shardOfObject, shardSelector } from "../core/structs/shards.ts";
import type { Resource } from "../core/structs/resources.ts";
import {
  selectedBackends,
  stopBackends,
  type TestBackend,
  withBackend,
} from "../testing/backend.ts";
import {
  applyCrdObjects,
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  NAMESPACES,
  PODTEMPLATES,
  sleep,
  tempDir,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const SECRETS: Resource = { ...CONFIGMAPS, plural: "secrets", singular: "secret", kind: "Secret" };
const GROUP = "contract.kopf.dev";

/** The backends: `$KOPF_TS_TEST_BACKEND`, or this suite's older `$KOPF_TS_CONTRACT_BACKENDS`. */
const BACKENDS = selectedBackends(
  Deno.env.get("KOPF_TS_CONTRACT_BACKENDS")?.replaceAll("real", "plane") ||
    Deno.env.get("KOPF_TS_TEST_BACKEND"),
);

interface Ctx {
  readonly backend: TestBackend;
  readonly client: KubeClient;
  readonly namespace: string;
  readonly kubeconfigPath: string;
}

function contract(name: string, fn: (ctx: Ctx) => Promise<void>): void {
  for (const backendName of BACKENDS) {
    Deno.test(`[${backendName}] ${name}`, opts, () =>
      withBackend(backendName, async (backend) => {
        const { kubeconfigPath } = backend;
        using client = new KubeClient(await loadKubeconfig({ paths: [kubeconfigPath] }));
        const namespace = await backend.createNamespace("contract");
        await fn({ backend, client, namespace, kubeconfigPath });
      }));
  }
}

async function failure(
  promise: Promise<unknown>,
  code: number,
  reason?: string,
): Promise<ApiError> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof ApiError, `expected an ApiError ${code}, got ${error}`);
  assert.equal(error.code, code, error.message);
  if (reason) assert.equal(error.reason, reason, error.message);
  return error;
}

interface RawEvent {
  type: string;
  object: KubeObject & { code?: number; reason?: string };
}

/** Reads watch events until `enough` says so, the stream ends, or the time is up. */
async function collect(
  response: Response,
  enough: (events: RawEvent[]) => boolean,
  timeoutMs = 15_000,
): Promise<RawEvent[]> {
  const events: RawEvent[] = [];
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => reader.cancel().catch(() => {}), timeoutMs);
  let buffer = "";
  try {
    while (!enough(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const line of lines.filter((l) => l.trim())) {
        const event = JSON.parse(line) as RawEvent;
        // The real controller manager adds this to every namespace at its own pace.
        if (event.object.metadata?.name !== "kube-root-ca.crt") events.push(event);
      }
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return events;
}

const summary = (events: RawEvent[]) =>
  events.map((e) => `${e.type} ${e.object.metadata?.name ?? e.object.metadata?.resourceVersion}`);

function crd(plural: string, kind: string, status: boolean): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: {
        plural,
        singular: plural.slice(0, -1),
        kind,
        shortNames: [`${plural}x`],
        categories: ["contract"],
      },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        ...(status ? { subresources: { status: {} } } : {}),
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

const WIDGETS: Resource = {
  ...KOPFEXAMPLES,
  group: GROUP,
  plural: "cwidgets",
  singular: "cwidget",
  kind: "CWidget",
  subresources: ["status"],
};

contract("CRUD with typed errors", async ({ client, namespace }) => {
  const created = await client.api.create(
    CONFIGMAPS,
    { metadata: { name: "a" }, data: { k: "1" } },
    { namespace },
  );
  assert.equal(created.kind, "ConfigMap");
  assert.equal(created.apiVersion, "v1");
  assert.ok(
    created.metadata?.uid && created.metadata.creationTimestamp && created.metadata.resourceVersion,
  );
  assert.equal(created.metadata.generation, undefined, "configmaps have no generation");
  assert.deepEqual((await client.api.get(CONFIGMAPS, "a", { namespace })).data, { k: "1" });

  const dup = await failure(
    client.api.create(CONFIGMAPS, { metadata: { name: "a" } }, { namespace }),
    409,
    "AlreadyExists",
  );
  assert.deepEqual([dup.details?.name, dup.details?.kind], ["a", "configmaps"]);
  const missing = await failure(
    client.api.get(CONFIGMAPS, "missing", { namespace }),
    404,
    "NotFound",
  );
  assert.equal(missing.serverMessage, `configmaps "missing" not found`);

  const stale = { metadata: { name: "a", resourceVersion: "1" }, data: { k: "2" } };
  await failure(client.api.replace(CONFIGMAPS, "a", stale, { namespace }), 409, "Conflict");
  const replaced = await client.api.replace(CONFIGMAPS, "a", { ...created, data: { k: "2" } }, {
    namespace,
  });
  assert.ok(Number(replaced.metadata?.resourceVersion) > Number(created.metadata.resourceVersion));
  const unconditional = await client.api.replace(CONFIGMAPS, "a", {
    metadata: { name: "a" },
    data: { k: "3" },
  }, { namespace });
  assert.deepEqual(unconditional.data, { k: "3" });
  assert.equal(unconditional.metadata?.uid, created.metadata.uid);
  await failure(
    client.api.replace(CONFIGMAPS, "a", { metadata: { name: "b" } }, { namespace }),
    400,
    "BadRequest",
  );

  const bad = await failure(
    client.api.create(CONFIGMAPS, { metadata: { name: "Bad_Name" } }, { namespace }),
    422,
    "Invalid",
  );
  assert.equal(bad.details?.causes?.[0]?.field, "metadata.name");
  const nowhere = await failure(
    client.api.create(CONFIGMAPS, { metadata: { name: "x" } }, { namespace: "no-such-ns" }),
    404,
    "NotFound",
  );
  assert.equal(nowhere.serverMessage, `namespaces "no-such-ns" not found`);
  const wrongKind = { apiVersion: "v1", kind: "Secret", metadata: { name: "x" } };
  await failure(client.api.create(CONFIGMAPS, wrongKind, { namespace }), 400, "BadRequest");

  const status = await client.api.delete(CONFIGMAPS, "a", { namespace }) as KubeObject & {
    status?: string;
    details?: { uid?: string };
  };
  assert.equal(status.kind, "Status");
  assert.equal(status.status, "Success");
  assert.equal(status.details?.uid, created.metadata.uid);
  await failure(client.api.get(CONFIGMAPS, "a", { namespace }), 404, "NotFound");
  await failure(client.api.delete(CONFIGMAPS, "a", { namespace }), 404, "NotFound");
});

contract("generateName", async ({ client, namespace }) => {
  const body = { metadata: { generateName: "gen-" } };
  const a = await client.api.create(CONFIGMAPS, body, { namespace });
  const b = await client.api.create(CONFIGMAPS, body, { namespace });
  assert.match(a.metadata!.name!, /^gen-[a-z0-9]{5}$/);
  assert.notEqual(a.metadata!.name, b.metadata!.name);
  assert.equal(a.metadata?.generateName, "gen-");
  const none = await failure(
    client.api.create(CONFIGMAPS, { metadata: {} }, { namespace }),
    422,
    "Invalid",
  );
  assert.equal(none.details?.causes?.[0]?.field, "metadata.name");
});

contract(
  "merge, JSON and strategic patches; pruning; no-op writes",
  async ({ client, namespace }) => {
    await applyCrds(client, "crds/example.yaml");
    const body = {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "p" },
      spec: { a: 1, b: { c: 2 } },
      junk: 1,
    };
    const created = await client.api.create(KOPFEXAMPLES, body, { namespace });
    assert.equal(created.junk, undefined, "unknown top-level fields are pruned by the schema");
    assert.equal(created.metadata?.generation, 1);

    const merged = await client.api.patch(KOPFEXAMPLES, "p", { spec: { b: { c: null, d: 3 } } }, {
      namespace,
    });
    assert.deepEqual(merged.spec, { a: 1, b: { d: 3 } });
    assert.equal(merged.metadata?.generation, 2);
    const labelled = await client.api.patch(
      KOPFEXAMPLES,
      "p",
      { metadata: { labels: { l: "1" } } },
      { namespace },
    );
    assert.equal(labelled.metadata?.generation, 2, "metadata changes keep the generation");
    const statused = await client.api.patch(KOPFEXAMPLES, "p", { status: { s: 1 } }, { namespace });
    assert.deepEqual(
      statused.status,
      { s: 1 },
      "without a status subresource, status is a normal field",
    );
    assert.equal(statused.metadata?.generation, 3, "…and its changes bump the generation");
    const noop = await client.api.patch(KOPFEXAMPLES, "p", { spec: { a: 1 } }, { namespace });
    assert.equal(
      noop.metadata?.resourceVersion,
      statused.metadata?.resourceVersion,
      "no-op: no write",
    );

    const stale = {
      metadata: { resourceVersion: created.metadata!.resourceVersion },
      spec: { a: 9 },
    };
    await failure(client.api.patch(KOPFEXAMPLES, "p", stale, { namespace }), 409, "Conflict");

    // `test` against null passes for a missing field (how finalizers are first added).
    const missing = await client.api.patch(KOPFEXAMPLES, "p", [
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "test", path: "/spec/nothing", value: null },
    ], { namespace, type: "json" });
    assert.equal(missing.metadata?.finalizers, undefined);
    await failure(
      client.api.patch(KOPFEXAMPLES, "p", [{ op: "test", path: "/spec/a", value: null }], {
        namespace,
        type: "json",
      }),
      422,
      "Invalid",
    );
    const json = await client.api.patch(KOPFEXAMPLES, "p", [
      { op: "test", path: "/spec/a", value: 1 },
      { op: "replace", path: "/spec/a", value: 2 },
      { op: "add", path: "/metadata/finalizers", value: ["contract.kopf.dev/x"] },
    ], { namespace, type: "json" });
    assert.equal((json.spec as { a: number }).a, 2);
    assert.deepEqual(json.metadata?.finalizers, ["contract.kopf.dev/x"]);
    await failure(
      client.api.patch(KOPFEXAMPLES, "p", [{ op: "test", path: "/spec/a", value: 1 }], {
        namespace,
        type: "json",
      }),
      422,
      "Invalid",
    );
    await failure(
      client.api.patch(KOPFEXAMPLES, "p", [{ op: "remove", path: "/spec/nope" }], {
        namespace,
        type: "json",
      }),
      422,
      "Invalid",
    );
    assert.equal(
      (await client.api.get(KOPFEXAMPLES, "p", { namespace })).metadata?.resourceVersion,
      json.metadata?.resourceVersion,
    );
    await failure(
      client.api.patch(KOPFEXAMPLES, "p", { spec: {} }, { namespace, type: "strategic" }),
      415,
      "UnsupportedMediaType",
    );
    await client.api.patch(KOPFEXAMPLES, "p", { metadata: { finalizers: null } }, { namespace });

    await client.api.create(CONFIGMAPS, {
      metadata: { name: "s", finalizers: ["a.b/c"] },
      data: { x: "1" },
    }, { namespace });
    const smp = await client.api.patch(CONFIGMAPS, "s", {
      metadata: { finalizers: ["d.e/f"] },
      data: { y: "2" },
    }, { namespace, type: "strategic" });
    assert.deepEqual(smp.data, { x: "1", y: "2" });
    assert.deepEqual(smp.metadata?.finalizers, ["d.e/f", "a.b/c"], "finalizers merge as a set");
    const emptied = await client.api.patch(CONFIGMAPS, "s", { metadata: { finalizers: [] } }, {
      namespace,
    });
    assert.equal(emptied.metadata?.finalizers, undefined, "empty finalizers are omitted");
  },
);

contract("/status subresource rules and generation", async ({ client, namespace }) => {
  await applyCrdObjects(client, [crd("cwidgets", "CWidget", true)]);
  const body = {
    apiVersion: `${GROUP}/v1`,
    kind: "CWidget",
    metadata: { name: "w" },
    spec: { a: 1 },
    status: { s: 0 },
  };
  const created = await client.api.create(WIDGETS, body, { namespace });
  assert.equal(created.status, undefined, "status is dropped on creation");
  assert.equal(created.metadata?.generation, 1);
  const main = await client.api.patch(WIDGETS, "w", { spec: { a: 2 }, status: { s: 1 } }, {
    namespace,
  });
  assert.equal(main.status, undefined, "the main endpoint ignores status");
  assert.equal(main.metadata?.generation, 2);
  const labels = await client.api.patch(WIDGETS, "w", { metadata: { labels: { x: "y" } } }, {
    namespace,
  });
  assert.equal(labels.metadata?.generation, 2);
  const status = await client.api.patch(WIDGETS, "w", {
    spec: { a: 3 },
    status: { s: 2 },
    metadata: { labels: { z: "1" } },
  }, { namespace, subresource: "status" });
  assert.deepEqual(status.status, { s: 2 });
  assert.deepEqual(status.spec, { a: 2 }, "/status ignores everything else");
  assert.equal(status.metadata?.labels?.z, undefined, "/status ignores metadata too");
  assert.equal(status.metadata?.generation, 2, "status writes keep the generation");
  const stale = {
    ...status,
    metadata: { ...status.metadata, resourceVersion: main.metadata!.resourceVersion },
    status: { s: 3 },
  };
  await failure(
    client.api.replace(WIDGETS, "w", stale, { namespace, subresource: "status" }),
    409,
    "Conflict",
  );
  const put = await client.api.replace(WIDGETS, "w", { ...status, status: { s: 4 } }, {
    namespace,
    subresource: "status",
  });
  assert.deepEqual(put.status, { s: 4 });
  const mainPut = await client.api.replace(WIDGETS, "w", {
    ...put,
    spec: { a: 5 },
    status: { s: 5 },
  }, { namespace });
  assert.deepEqual(mainPut.status, { s: 4 });
  assert.equal(mainPut.metadata?.generation, 3);
  await applyCrds(client, "crds/example.yaml");
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "k" },
  }, { namespace });
  await failure(
    client.api.patch(KOPFEXAMPLES, "k", { status: {} }, { namespace, subresource: "status" }),
    404,
    "NotFound",
  );
});

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

contract("finalizers and deletionTimestamp", async ({ client, namespace }) => {
  await applyCrds(client, "crds/example.yaml");
  const body = {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "f", finalizers: ["contract.kopf.dev/f"] },
    spec: {},
  };
  const created = await client.api.create(KOPFEXAMPLES, body, { namespace });
  const watch = await client.api.watch(KOPFEXAMPLES, {
    namespace,
    resourceVersion: created.metadata!.resourceVersion,
    allowBookmarks: false,
  });
  const deleting = await client.api.delete(KOPFEXAMPLES, "f", { namespace });
  assert.ok(deleting.metadata?.deletionTimestamp);
  assert.equal(deleting.metadata?.deletionGracePeriodSeconds, 0);
  assert.equal(deleting.metadata?.generation, 2, "marking for deletion bumps the generation");
  const again = await client.api.delete(KOPFEXAMPLES, "f", { namespace });
  assert.equal(again.metadata?.deletionTimestamp, deleting.metadata?.deletionTimestamp);
  assert.equal(again.metadata?.resourceVersion, deleting.metadata?.resourceVersion);
  const added = await failure(
    client.api.patch(KOPFEXAMPLES, "f", {
      metadata: { finalizers: ["contract.kopf.dev/f", "x.y/z"] },
    }, { namespace }),
    422,
    "Invalid",
  );
  assert.equal(added.details?.causes?.[0]?.field, "metadata.finalizers");
  await client.api.patch(KOPFEXAMPLES, "f", { metadata: { labels: { still: "editable" } } }, {
    namespace,
  });
  const last = await client.api.patch(KOPFEXAMPLES, "f", { metadata: { finalizers: null } }, {
    namespace,
  });
  assert.equal(last.metadata?.finalizers, undefined);
  await failure(client.api.get(KOPFEXAMPLES, "f", { namespace }), 404, "NotFound");
  const events = await collect(watch, (e) => e.some((x) => x.type === "DELETED"));
  assert.deepEqual(events.map((e) => e.type), ["MODIFIED", "MODIFIED", "DELETED"]);
});

contract("delete preconditions", async ({ client, namespace }) => {
  const cm = await client.api.create(CONFIGMAPS, { metadata: { name: "p" } }, { namespace });
  await failure(
    client.api.delete(CONFIGMAPS, "p", { namespace, preconditions: { uid: "nope" } }),
    409,
    "Conflict",
  );
  await failure(
    client.api.delete(CONFIGMAPS, "p", { namespace, preconditions: { resourceVersion: "1" } }),
    409,
    "Conflict",
  );
  const { uid, resourceVersion } = cm.metadata!;
  await client.api.delete(CONFIGMAPS, "p", {
    namespace,
    preconditions: { uid: uid!, resourceVersion: resourceVersion! },
  });
  await failure(client.api.get(CONFIGMAPS, "p", { namespace }), 404);
});

contract("owner-reference garbage collection", async ({ client, namespace }) => {
  const make = (name: string, owners: KubeObject[] = [], block = false) =>
    client.api.create(CONFIGMAPS, {
      metadata: {
        name,
        ownerReferences: owners.map((o) => ({
          apiVersion: "v1",
          kind: "ConfigMap",
          name: o.metadata!.name!,
          uid: o.metadata!.uid!,
          ...(block ? { blockOwnerDeletion: true } : {}),
        })),
      },
    }, { namespace });
  const exists = async (name: string) =>
    await client.api.get(CONFIGMAPS, name, { namespace }).then(() => true, () => false);
  const [owner, keeper, fg, orphaner] = await Promise.all(
    ["owner", "keeper", "fg", "orphaner"].map((n) => make(n)),
  );
  await make("dep-1", [owner!], true);
  await make("dep-2", [owner!]);
  await make("shared", [owner!, keeper!]);
  await make("fg-dep", [fg!], true);
  await make("orphan", [orphaner!]);
  await client.api.create(CONFIGMAPS, {
    metadata: {
      name: "dangling",
      ownerReferences: [{
        apiVersion: "v1",
        kind: "ConfigMap",
        name: "ghost",
        uid: crypto.randomUUID(),
      }],
    },
  }, { namespace });

  await client.api.delete(CONFIGMAPS, "owner", { namespace, propagationPolicy: "Background" });
  const fgDeleting = await client.api.delete(CONFIGMAPS, "fg", {
    namespace,
    propagationPolicy: "Foreground",
  });
  assert.ok(fgDeleting.metadata?.deletionTimestamp);
  assert.deepEqual(fgDeleting.metadata?.finalizers, ["foregroundDeletion"]);
  await client.api.delete(CONFIGMAPS, "orphaner", { namespace, propagationPolicy: "Orphan" });

  await eventually(
    async () => !(await exists("dep-1")) && !(await exists("dep-2")),
    30_000,
    "dependents deleted",
  );
  await eventually(
    async () => !(await exists("fg")) && !(await exists("fg-dep")),
    30_000,
    "foreground deletion",
  );
  await eventually(async () => !(await exists("orphaner")), 30_000, "orphaning owner gone");
  await eventually(async () => !(await exists("dangling")), 30_000, "dangling dependent deleted");
  const shared = await client.api.get(CONFIGMAPS, "shared", { namespace });
  const orphan = await client.api.get(CONFIGMAPS, "orphan", { namespace });
  assert.equal(orphan.metadata?.ownerReferences, undefined, "orphaned: references removed");
  await eventually(
    async () => {
      const refs = (await client.api.get(CONFIGMAPS, "shared", { namespace })).metadata
        ?.ownerReferences;
      return refs?.length === 1 && refs[0]!.name === "keeper";
    },
    30_000,
    `the dangling reference removed from ${JSON.stringify(shared.metadata?.ownerReferences)}`,
  );
});

contract(
  "persistent volume claims: defaults, a pending claim's spec is immutable, deleted with their owner",
  async ({ client, namespace }) => {
    const PVCS: Resource = {
      ...CONFIGMAPS,
      plural: "persistentvolumeclaims",
      singular: "persistentvolumeclaim",
      kind: "PersistentVolumeClaim",
    };
    const owner = await client.api.create(CONFIGMAPS, { metadata: { name: "owner" } }, {
      namespace,
    });
    const created = await client.api.create(PVCS, {
      metadata: {
        name: "claim",
        ownerReferences: [{
          apiVersion: "v1",
          kind: "ConfigMap",
          name: "owner",
          uid: owner.metadata!.uid!,
          controller: true,
          blockOwnerDeletion: true,
        }],
      },
      spec: {
        storageClassName: "standard",
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1G" } },
      },
    }, { namespace });
    assert.equal((created.spec as { volumeMode?: string }).volumeMode, "Filesystem");
    assert.deepEqual(created.status, { phase: "Pending" });

    // Not bound: the size (like any other spec field) cannot change; labels can.
    const resize = { spec: { resources: { requests: { storage: "2G" } } } };
    const refused = await failure(client.api.patch(PVCS, "claim", resize, { namespace }), 422);
    assert.match(refused.message, /spec is immutable after creation except resources\.requests/);
    const relabelled = await client.api.patch(PVCS, "claim", { metadata: { labels: { a: "b" } } }, {
      namespace,
    });
    assert.deepEqual(relabelled.metadata?.labels, { a: "b" });

    await client.api.delete(CONFIGMAPS, "owner", { namespace });
    await eventually(
      async () => await client.api.get(PVCS, "claim", { namespace }).then(() => false, () => true),
      30_000,
      "the claim deleted with its owner",
    );
  },
);

contract(
  "namespace deletion: Terminating, contents deleted, then the namespace",
  async ({ client, namespace }) => {
    await client.api.create(CONFIGMAPS, { metadata: { name: "plain" } }, { namespace });
    await client.api.create(CONFIGMAPS, {
      metadata: { name: "held", finalizers: ["contract.kopf.dev/hold"] },
    }, { namespace });
    const deleting = await client.api.delete(NAMESPACES, namespace);
    assert.ok(deleting.metadata?.deletionTimestamp);
    assert.equal((deleting.status as { phase?: string }).phase, "Terminating");
    const refused = await failure(
      client.api.create(CONFIGMAPS, { metadata: { name: "late" } }, { namespace }),
      403,
      "Forbidden",
    );
    assert.match(refused.serverMessage, /is being terminated/);
    await eventually(
      async () =>
        await client.api.get(CONFIGMAPS, "plain", { namespace }).then(() => false, () => true),
      60_000,
      "contents deleted",
    );
    const held = await eventually(
      async () => {
        const cm = await client.api.get(CONFIGMAPS, "held", { namespace });
        return cm.metadata?.deletionTimestamp ? cm : undefined;
      },
      60_000,
      "the held object marked for deletion",
    );
    assert.ok(held);
    assert.ok(await client.api.get(NAMESPACES, namespace), "the namespace waits for its contents");
    await client.api.patch(CONFIGMAPS, "held", { metadata: { finalizers: null } }, { namespace });
    await eventually(
      async () => await client.api.get(NAMESPACES, namespace).then(() => false, () => true),
      60_000,
      "namespace gone",
    );
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

contract("discovery follows a CRD created at runtime", async ({ client, namespace }) => {
  const plural = `g${
    Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => "abcdefghij"[b % 10]).join("")
  }s`;
  const definition = crd(plural, "Gadget", true);
  await applyCrdObjects(client, [definition]);
  const live = await client.api.get(CRD_RESOURCE, `${plural}.${GROUP}`);
  const status = live.status as {
    conditions: Array<{ type: string; status: string }>;
    acceptedNames: { kind: string };
  };
  assert.ok(status.conditions.some((c) => c.type === "NamesAccepted" && c.status === "True"));
  assert.equal(status.acceptedNames.kind, "Gadget");
  const list = await client.http.json<
    {
      resources: Array<
        {
          name: string;
          verbs: string[];
          shortNames?: string[];
          categories?: string[];
          namespaced: boolean;
        }
      >;
    }
  >({ path: `/apis/${GROUP}/v1` });
  const entry = list.resources.find((r) => r.name === plural);
  assert.ok(entry && entry.verbs.includes("watch") && entry.namespaced);
  assert.deepEqual([entry.shortNames, entry.categories], [[`${plural}x`], ["contract"]]);
  assert.ok(list.resources.some((r) => r.name === `${plural}/status`));
  const [found] = await client.discovery.find((r) => r.plural === plural);
  assert.deepEqual(found?.subresources, ["status"]);
  const core = await client.http.json<
    { resources: Array<{ name: string; shortNames?: string[]; namespaced: boolean }> }
  >({ path: "/api/v1" });
  assert.deepEqual(core.resources.find((r) => r.name === "configmaps")?.shortNames, ["cm"]);
  assert.equal(core.resources.find((r) => r.name === "namespaces")?.namespaced, false);
  const groups = await client.http.json<{ groups: Array<{ name: string }> }>({ path: "/apis" });
  assert.ok(groups.groups.some((g) => g.name === GROUP));
  assert.match(
    (await client.http.json<{ gitVersion: string }>({ path: "/version" })).gitVersion,
    /^v1\./,
  );

  const gadget = { ...WIDGETS, plural, kind: "Gadget" };
  await client.api.create(gadget, {
    apiVersion: `${GROUP}/v1`,
    kind: "Gadget",
    metadata: { name: "g" },
  }, { namespace });
  await client.api.delete(CRD_RESOURCE, `${plural}.${GROUP}`);
  await eventually(
    async () =>
      await client.api.get(CRD_RESOURCE, `${plural}.${GROUP}`).then(() => false, () => true),
    60_000,
    "CRD gone",
  );
  await eventually(
    async () => {
      const again = await client.http.json<{ resources: Array<{ name: string }> }>({
        path: `/apis/${GROUP}/v1`,
      }).catch(() => ({ resources: [] }));
      return !again.resources.some((r) => r.name === plural);
    },
    30_000,
    "gone from discovery",
  );
});

contract(
  "/version/ with a trailing slash answers as /version (kr8s asks that)",
  async ({ client }) => {
    const plain = await client.http.json<{ gitVersion: string }>({ path: "/version" });
    const slashed = await client.http.json<{ gitVersion: string }>({ path: "/version/" });
    assert.match(slashed.gitVersion, /^v1\./);
    assert.deepEqual(slashed, plain);
  },
);

contract("authentication: other tokens get 401", async ({ client }) => {
  const response = await fetch(`${client.http.connection.server}/api/v1/namespaces`, {
    headers: { authorization: "Bearer wrong" },
    client: Deno.createHttpClient({
      caCerts: client.http.connection.caPem ? [client.http.connection.caPem] : [],
    }),
  } as RequestInit);
  assert.equal(response.status, 401);
  assert.equal((await response.json()).reason, "Unauthorized");
});

const kubectl = await Deno.stat("/usr/bin/kubectl").then(() => "/usr/bin/kubectl", () => undefined);

contract("kubectl: get, apply, create", async ({ namespace, kubeconfigPath }) => {
  if (!kubectl) return;
  const run = async (...args: string[]) => {
    const out = await new Deno.Command(kubectl, {
      args: ["--kubeconfig", kubeconfigPath, ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, `kubectl ${args.join(" ")}: ${text}`);
    return text;
  };
  assert.match(await run("get", "ns"), /default\s+Active/);
  assert.match(
    await run("apply", "-f", "crds/example.yaml"),
    /kopfexamples.kopf.dev (created|unchanged|configured)/,
  );
  await sleep(1000); // kubectl's discovery cache may predate the CRD
  assert.match(await run("get", "kopfexamples", "-n", namespace), /No resources found/);
  const object =
    `{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{"name":"kx","namespace":"${namespace}"},"spec":{"duration":"1m"}}`;
  const file = await Deno.makeTempFile({ suffix: ".json" });
  await Deno.writeTextFile(file, object);
  assert.match(await run("apply", "-f", file), /kopfexample.kopf.dev\/kx created/);
  assert.match(await run("get", "kex", "-n", namespace), /kx\s+1m/);
  assert.match(
    await run("create", "configmap", "made-by-kubectl", "-n", namespace, "--from-literal=a=b"),
    /created/,
  );
  assert.match(
    await run("get", "cm", "made-by-kubectl", "-n", namespace, "-o", "jsonpath={.data.a}"),
    /^b$/,
  );
  assert.match(await run("delete", "kex", "kx", "-n", namespace), /deleted/);
  await Deno.remove(file);
});

contract(
  "kubectl apply --server-side: creates, an unchanged apply keeps the resourceVersion, another manager conflicts until --force-conflicts, unstated fields go; custom resources too",
  async ({ namespace, kubeconfigPath }) => {
    if (!kubectl) {
      console.warn("SKIPPED: no /usr/bin/kubectl on this machine");
      return;
    }
    const kubectlRun = async (...args: string[]) => {
      const out = await new Deno.Command(kubectl, {
        args: ["--kubeconfig", kubeconfigPath, "-n", namespace, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      return { code: out.code, text };
    };
    const ok = async (...args: string[]) => {
      const { code, text } = await kubectlRun(...args);
      assert.equal(code, 0, `kubectl ${args.join(" ")}: ${text}`);
      return text;
    };
    await using dir = await tempDir();
    const file = `${dir.path}/cm.json`;
    const state = async (data?: Record<string, string>) => {
      await Deno.writeTextFile(
        file,
        JSON.stringify({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "ssa-kubectl", namespace },
          ...(data ? { data } : {}),
        }),
      );
      return file;
    };
    const field = (path: string) => ok("get", "cm", "ssa-kubectl", "-o", `jsonpath={${path}}`);
    assert.match(
      await ok("apply", "--server-side", "-f", await state({ a: "1", b: "2" })),
      /configmap\/ssa-kubectl serverside-applied/,
    );
    const version = await field(".metadata.resourceVersion");
    await ok("apply", "--server-side", "-f", file);
    assert.equal(await field(".metadata.resourceVersion"), version, "nothing changed");
    // Another manager stating another value for a field "kubectl" owns: a conflict, exit 1.
    const conflict = await kubectlRun(
      "apply",
      "--server-side",
      "--field-manager=other",
      "-f",
      await state({ a: "9" }),
    );
    assert.equal(conflict.code, 1, conflict.text);
    assert.match(
      conflict.text,
      /Apply failed with 1 conflict: conflict with "kubectl".*\.data\.a/,
    );
    assert.equal(await field(".data.a"), "1");
    await ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", file);
    assert.equal(await field(".data"), JSON.stringify({ a: "9", b: "2" }));
    // "kubectl" states no data now: b (its own) goes, a (taken over by "other") stays.
    await ok("apply", "--server-side", "-f", await state());
    assert.equal(await field(".data"), JSON.stringify({ a: "9" }));

    await ok("apply", "-f", "crds/example.yaml");
    await sleep(1000); // kubectl's discovery cache may predate the CRD
    const kex = `${dir.path}/kex.json`;
    await Deno.writeTextFile(
      kex,
      JSON.stringify({
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "kx-ssa", namespace },
        spec: { duration: "2m" },
      }),
    );
    assert.match(
      await ok("apply", "--server-side", "-f", kex),
      /kopfexample.kopf.dev\/kx-ssa serverside-applied/,
    );
    assert.equal(await ok("get", "kex", "kx-ssa", "-o", "jsonpath={.spec.duration}"), "2m");
  },
);

contract(
  "server-side apply: creates, merges, owns fields, conflicts as typed errors, force takes over",
  async ({ backend, client, namespace }) => {
    const cm = (data: Record<string, string>): KubeObject => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "ssa", namespace },
      data,
    });
    await failure(
      applyObject(client.api, CONFIGMAPS, cm({ a: "1" }), { fieldManager: "" }).catch(
        (error) => {
          // Our client refuses before sending; check the server's answer with a raw request.
          assert.ok(error instanceof TypeError);
          return client.http.json({
            method: "PATCH",
            path: `/api/v1/namespaces/${namespace}/configmaps/ssa`,
            body: cm({ a: "1" }),
            contentType: APPLY_PATCH_CONTENT,
          });
        },
      ),
      422,
    );
    const created = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "2" }), {
      fieldManager: "first",
    });
    assert.deepEqual(created.data, { a: "1", b: "2" });
    // The same apply again changes nothing: no new resourceVersion.
    const again = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "2" }), {
      fieldManager: "first",
    });
    assert.equal(again.metadata?.resourceVersion, created.metadata?.resourceVersion);
    // Another manager may add its own field; stating the same value is no conflict.
    const shared = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", c: "3" }), {
      fieldManager: "second",
    });
    assert.deepEqual(shared.data, { a: "1", b: "2", c: "3" });
    // A different value for a field someone else owns is a typed conflict naming the field.
    const conflict = await applyObject(client.api, CONFIGMAPS, cm({ b: "X" }), {
      fieldManager: "second",
    }).then(() => undefined, (e) => e);
    assert.ok(conflict instanceof ApplyConflictError, String(conflict));
    assert.equal(conflict.code, 409);
    assert.deepEqual(conflict.conflicts.map((c) => c.field), [".data.b"]);
    // Force takes it over; the first manager then no longer owns it.
    const forced = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "X", c: "3" }), {
      fieldManager: "second",
      force: true,
    });
    assert.deepEqual(forced.data, { a: "1", b: "X", c: "3" });
    // A manager's fields it no longer states are removed, unless another manager owns them too.
    const dropped = await applyObject(client.api, CONFIGMAPS, cm({ c: "3" }), {
      fieldManager: "second",
    });
    assert.deepEqual(dropped.data, { a: "1", c: "3" }, "b went; a stays (also owned by first)");
    if (backend.name === "plane") {
      assert.ok(dropped.metadata?.managedFields, "kube-apiserver shows managedFields");
    } else {
      assert.equal(dropped.metadata?.managedFields, undefined, "the emulator does not show them");
    }
    // An ordinary write records a manager on kube-apiserver only: applying over it conflicts there.
    await client.api.patch(CONFIGMAPS, "ssa", { data: { c: "edited" } }, { namespace });
    const overEdit = await applyObject(client.api, CONFIGMAPS, cm({ c: "3" }), {
      fieldManager: "second",
    }).then((o) => o, (e) => e);
    if (backend.name === "plane") {
      assert.ok(overEdit instanceof ApplyConflictError, String(overEdit));
    } else assert.deepEqual((overEdit as KubeObject).data, { a: "1", c: "3" });
  },
);

contract(
  "server-side apply of the status subresource changes only the status",
  async ({ client, namespace }) => {
    await applyCrdObjects(client, [crd("cwidgets", "CWidget", true)]);
    const widget = (name: string, extra: object): KubeObject => ({
      apiVersion: `${GROUP}/v1`,
      kind: "CWidget",
      metadata: { name, namespace },
      ...extra,
    });
    await eventually(() =>
      client.api.create(WIDGETS, widget("ssa-status", { spec: { field: "x" } }), { namespace })
        .catch(() => undefined)
    );
    const applied = await applyObject(
      client.api,
      WIDGETS,
      widget("ssa-status", { spec: { field: "ignored" }, status: { phase: "Ready" } }),
      { fieldManager: "op", subresource: "status" },
    );
    assert.deepEqual(applied.status, { phase: "Ready" });
    assert.deepEqual(applied.spec, { field: "x" });
    await failure(
      applyObject(client.api, WIDGETS, widget("missing", { status: { phase: "Ready" } }), {
        fieldManager: "op",
        subresource: "status",
      }),
      404,
    );
  },
);

contract(
  "shardSelector: lists and watches are filtered by the 64-bit FNV-1a of the uid as our hash says; built-in lists echo the selector, custom-resource lists do not",
  async ({ client, namespace }) => {
    await applyCrds(client, "crds/example.yaml");
    const selector = shardSelector([0], 2, "uid"); // the lower half of the hash space
    const names = Array.from({ length: 8 }, (_, i) => `s${i}`);
    const mine = (items: KubeObject[]) =>
      items.filter((o) => names.includes(o.metadata?.name ?? "")).map((o) => o.metadata!.name!)
        .sort();
    const inShard = (items: KubeObject[]) =>
      mine(items.filter((o) => shardOfObject(o, "uid", 2) === 0));
    for (const resource of [CONFIGMAPS, KOPFEXAMPLES]) {
      const created: KubeObject[] = [];
      for (const name of names) {
        const body = resource === CONFIGMAPS
          ? { metadata: { name } }
          : { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: {} };
        created.push(await client.api.create(resource, body, { namespace }));
      }
      const expected = inShard(created);
      const listed = await client.http.json<
        {
          metadata?: { resourceVersion?: string; shardInfo?: { selector?: string } };
          items: KubeObject[];
        }
      >({
        method: "GET",
        path: resource === CONFIGMAPS
          ? `/api/v1/namespaces/${namespace}/configmaps`
          : `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`,
        query: { shardSelector: selector },
      });
      assert.deepEqual(
        mine(listed.items),
        expected,
        `${resource.plural}: exactly the shard's objects`,
      );
      assert.equal(
        listed.metadata?.shardInfo?.selector,
        resource === CONFIGMAPS ? selector : undefined,
        `${resource.plural}: the echo`,
      );

      // A watch from the list's version: only the shard's objects come.
      const watch = await client.api.watch(resource, {
        namespace,
        shardSelector: selector,
        resourceVersion: listed.metadata?.resourceVersion,
        allowBookmarks: false,
      });
      const changes = created.map((o) =>
        client.api.patch(resource, o.metadata!.name!, { metadata: { labels: { seen: "1" } } }, {
          namespace,
        })
      );
      await Promise.all(changes);
      const events = await collect(
        watch,
        (e) => new Set(e.map((x) => x.object.metadata?.name)).size >= expected.length,
      );
      assert.deepEqual([...new Set(mine(events.map((e) => e.object)))].sort(), expected);
    }
  },
);

contract(
  "shardSelector: bad selectors get 500 'invalid shard selector: …' with the API server's wording",
  async ({ namespace, kubeconfigPath }) => {
    // 500s are retried by default: not here.
    using client = new KubeClient(await loadKubeconfig({ paths: [kubeconfigPath] }), {
      retries: 0,
    });
    const uid = "object.metadata.uid";
    const cases = {
      "   ": "empty shard selector is not allowed; omit the parameter for unfiltered lists",
      [`shardRange(${uid}, '0x00', '0x8000000000000000')`]:
        `hexStart must be a 0x-prefixed 16-digit hex value, got "0x00" (did you mean "0x0000000000000000"?)`,
      "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')":
        `unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace`,
      [`shardRange(${uid}, '0x8000000000000000', '0x0000000000000000')`]:
        "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
      [`shardRange(${uid}, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')`]:
        `all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"`,
    };
    for (const [selector, message] of Object.entries(cases)) {
      const error = await failure(
        client.api.list(CONFIGMAPS, { namespace, shardSelector: selector }),
        500,
      );
      assert.equal(
        error.message.replace(/^.*?invalid shard selector: /s, "").replace(/ \[GET .*\]$/s, ""),
        message,
      );
    }
  },
);

contract(
  "Leases: create, compare-and-swap replace (409 on a stale resourceVersion), list by label, delete",
  async ({ client, namespace }) => {
    const lease = await client.api.create<Lease>(LEASES, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "l1", labels: { role: "shard" } },
      spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
    }, { namespace });
    assert.equal(lease.spec?.holderIdentity, "a");
    const taken = await client.api.replace<Lease>(LEASES, "l1", {
      ...lease,
      spec: { ...lease.spec, holderIdentity: "b" },
    }, { namespace });
    assert.equal(taken.spec?.holderIdentity, "b");
    await failure(
      client.api.replace(LEASES, "l1", { ...lease, spec: { ...lease.spec, holderIdentity: "c" } }, {
        namespace,
      }),
      409,
      "Conflict",
    );
    const { items } = await client.api.list<Lease>(LEASES, {
      namespace,
      labelSelector: "role=shard",
    });
    assert.deepEqual(items.map((l) => [l.metadata?.name, l.spec?.holderIdentity]), [["l1", "b"]]);
    await client.api.delete(LEASES, "l1", { namespace });
    await failure(client.api.get(LEASES, "l1", { namespace }), 404, "NotFound");
  },
);

contract(
  "request bodies over 3 MiB: 413 RequestEntityTooLarge, nothing stored",
  async ({ client, namespace }) => {
    const big = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "big" },
      data: { x: "a".repeat(3 * 1024 * 1024) },
    };
    const error = await failure(
      client.api.create(CONFIGMAPS, big, { namespace }),
      413,
      "RequestEntityTooLarge",
    );
    assert.match(error.message, /Request entity too large: limit is 3145728/);
    await failure(client.api.get(CONFIGMAPS, "big", { namespace }), 404, "NotFound");
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

Deno.test("stop the emulator", opts, stopBackends);
