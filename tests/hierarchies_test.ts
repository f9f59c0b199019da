/**
 * The hierarchies kit against the real control plane: the owner references that `adopt()` puts
 * into children are accepted by the API server and followed by kube-controller-manager's
 * garbage collector (cascaded deletion), while removed references orphan the child.
 */

import assert from "node:assert/strict";
import { ApiError } from "../core/client/errors.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { on } from "../core/api/on.ts";
import { adopt, removeOwnerReference } from "../kits/hierarchies.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  PODTEMPLATES,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** The garbage collector may need a while to sync its informers on a fresh control plane. */
const GC_TIMEOUT_MS = 90_000;

/** Whether a get answers 404 NotFound; other errors propagate. */
async function isGone(get: () => Promise<KubeObject>): Promise<boolean> {
  try {
    await get();
    return false;
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return true;
    throw error;
  }
}

Deno.test(
  "adopt(): the garbage collector deletes the child with its parent (HIER-09, HIER-11)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("hier-gc");
    const parent = await client.api.create(CONFIGMAPS, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "parent", labels: { app: "hierarchies", tier: "parent" } },
      data: { role: "parent" },
    }, { namespace });
    const bystander = await client.api.create(CONFIGMAPS, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "bystander" },
      data: { role: "bystander" },
    }, { namespace });

    const child: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { labels: { tier: "child" } },
      data: { role: "child" },
    };
    adopt(child, parent);
    assert.equal(child.metadata?.namespace, namespace, "the parent's namespace");
    assert.equal(child.metadata?.generateName, "parent-", "named after the parent");
    assert.equal(child.metadata?.name, undefined);

    // No namespace option: the client takes it from the adopted body.
    const created = await client.api.create(CONFIGMAPS, child);
    assert.equal(created.metadata?.namespace, namespace);
    assert.match(created.metadata?.name ?? "", /^parent-[a-z0-9]{5}$/);
    assert.deepEqual(created.metadata?.labels, { app: "hierarchies", tier: "child" });
    assert.deepEqual(created.metadata?.ownerReferences, [{
      apiVersion: "v1",
      kind: "ConfigMap",
      name: "parent",
      uid: parent.metadata!.uid!,
      controller: true,
      blockOwnerDeletion: true,
    }]);

    const childName = created.metadata!.name!;
    await client.api.delete(CONFIGMAPS, "parent", { namespace });
    await eventually(
      () => isGone(() => client.api.get(CONFIGMAPS, childName, { namespace })),
      GC_TIMEOUT_MS,
      "the garbage collector to delete the adopted child",
    );
    const survivor = await client.api.get(CONFIGMAPS, "bystander", { namespace });
    assert.equal(survivor.metadata?.uid, bystander.metadata?.uid, "not owned, not deleted");
  },
);

Deno.test(
  "adopt(): foreground deletion waits for the blocking children; removed references orphan (HIER-04, HIER-05, HIER-09, HIER-11)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("hier-fg");
    const parent = await client.api.create(CONFIGMAPS, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "owner", labels: { app: "hierarchies" } },
    }, { namespace });

    // A PodTemplate with exactly the parent's name and the labels on its nested pod template.
    const template: KubeObject = {
      apiVersion: "v1",
      kind: "PodTemplate",
      template: { spec: { containers: [{ name: "main", image: "example.invalid/app:1" }] } },
    };
    adopt(template, parent, { strict: true, nested: "template" });
    const owned = await client.api.create(PODTEMPLATES, template);
    assert.equal(owned.metadata?.name, "owner");
    assert.deepEqual(owned.metadata?.labels, { app: "hierarchies" });
    assert.deepEqual(
      (owned.template as { metadata?: { labels?: unknown } }).metadata?.labels,
      { app: "hierarchies" },
    );
    assert.equal(owned.metadata?.ownerReferences?.[0]?.uid, parent.metadata?.uid);

    // Adopted, then released again: an orphan that outlives the parent.
    const orphan: KubeObject = { apiVersion: "v1", kind: "ConfigMap", data: { role: "orphan" } };
    adopt(orphan, parent);
    removeOwnerReference(orphan, parent);
    const released = await client.api.create(CONFIGMAPS, orphan);
    assert.deepEqual(released.metadata?.ownerReferences ?? [], []);

    const deleting = await client.api.delete(CONFIGMAPS, "owner", {
      namespace,
      propagationPolicy: "Foreground",
    });
    assert.ok(deleting.metadata?.deletionTimestamp, "the parent waits for its children");
    assert.ok(deleting.metadata?.finalizers?.includes("foregroundDeletion"));

    await eventually(
      () => isGone(() => client.api.get(CONFIGMAPS, "owner", { namespace })),
      GC_TIMEOUT_MS,
      "the foreground deletion of the parent",
    );
    assert.ok(
      await isGone(() => client.api.get(PODTEMPLATES, "owner", { namespace })),
      "blockOwnerDeletion: the child was deleted before its parent",
    );
    const kept = await client.api.get(CONFIGMAPS, released.metadata!.name!, { namespace });
    assert.equal(kept.metadata?.uid, released.metadata?.uid, "the orphan survives");
  },
);

Deno.test(
  "adopt(child) in a create handler takes the handled object as the owner (HIER-10, HIST-35)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("hier-implicit");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, async function make_child() {
        const child: KubeObject = { apiVersion: "v1", kind: "ConfigMap", data: { a: "b" } };
        await Promise.resolve(); // the handled object is kept across awaits
        adopt(child, undefined, { strict: true });
        const created = await client.api.create(CONFIGMAPS, child);
        return created.metadata?.name;
      });
    }, { namespaces: [namespace] });
    await op.ready;
    const parent = await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "implicit", labels: { team: "a" } },
    }, { namespace });
    const childName = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "implicit", { namespace });
        return (o.status as Record<string, unknown> | undefined)?.make_child;
      },
      15_000,
      "the handler's result",
    );
    assert.equal(childName, "implicit", "named exactly after the handled object");
    const child = await client.api.get(CONFIGMAPS, "implicit", { namespace });
    assert.deepEqual(child.metadata?.labels, { team: "a" });
    assert.deepEqual(child.metadata?.ownerReferences, [{
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      name: "implicit",
      uid: parent.metadata!.uid!,
      controller: true,
      blockOwnerDeletion: true,
    }]);
  },
);
