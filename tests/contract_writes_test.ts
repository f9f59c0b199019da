/**
 * Contract tests of writes, on the emulator and the real API server alike (the runner:
 * tests/_contract.ts): create, get, replace and delete with their typed errors (409, 404, 400,
 * 422), `generateName`, merge, JSON and strategic-merge patches with schema pruning and no-op
 * writes, the `/status` subresource's rules and the generation, and the 3 MiB request limit.
 */

import assert from "node:assert/strict";
import type { KubeObject } from "../core/structs/objects.ts";
import { contract, crd, failure, GROUP, stopEmulatorLast, WIDGETS } from "./_contract.ts";
import { applyCrdObjects, applyCrds, CONFIGMAPS, KOPFEXAMPLES } from "./_support.ts";

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

stopEmulatorLast();
