/**
 * Contract tests of deletion, on the emulator and the real API server alike (the runner:
 * tests/_contract.ts): finalizers and `deletionTimestamp`, delete preconditions, owner-reference
 * garbage collection (background, foreground, orphan, dangling owners), persistent volume claims
 * deleted with their owner, and a namespace's deletion with its contents.
 */

import assert from "node:assert/strict";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { collect, contract, failure, stopEmulatorLast } from "./_contract.ts";
import { applyCrds, CONFIGMAPS, eventually, KOPFEXAMPLES, NAMESPACES } from "./_support.ts";

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

stopEmulatorLast();
