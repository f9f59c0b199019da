/**
 * The hierarchies kit's owner references: `buildOwnerReference()`, `appendOwnerReference()`
 * and `removeOwnerReference()` (HIER-04 to HIER-06).
 */

import assert from "node:assert/strict";
import {
  appendOwnerReference,
  buildOwnerReference,
  type KubeObject,
  removeOwnerReference,
} from "./hierarchies.ts";
import { OWNER_REF, parent, UID } from "./_test_support.ts";

// --- HIER-06: buildOwnerReference -------------------------------------------------------------

Deno.test("buildOwnerReference() builds a controlling, blocking reference by default (HIER-06)", () => {
  const ref = buildOwnerReference(parent());
  assert.deepEqual(ref, OWNER_REF);
  assert.deepEqual(Object.keys(ref), [
    "controller",
    "blockOwnerDeletion",
    "apiVersion",
    "kind",
    "name",
    "uid",
  ]);
});

Deno.test("buildOwnerReference() takes the controller & blockOwnerDeletion flags (HIER-06)", () => {
  assert.deepEqual(buildOwnerReference(parent(), { controller: false }), {
    ...OWNER_REF,
    controller: false,
  });
  assert.deepEqual(buildOwnerReference(parent(), { blockOwnerDeletion: false }), {
    ...OWNER_REF,
    blockOwnerDeletion: false,
  });
  assert.deepEqual(
    buildOwnerReference(parent(), { controller: undefined, blockOwnerDeletion: undefined }),
    OWNER_REF,
    "undefined means the default",
  );
});

Deno.test("buildOwnerReference() omits null flags and fields the body lacks (HIER-06)", () => {
  const { controller: _, ...withoutController } = OWNER_REF;
  assert.deepEqual(buildOwnerReference(parent(), { controller: null }), withoutController);
  const { blockOwnerDeletion: __, ...withoutBlocking } = OWNER_REF;
  assert.deepEqual(buildOwnerReference(parent(), { blockOwnerDeletion: null }), withoutBlocking);
  assert.deepEqual(buildOwnerReference({ kind: "Node", metadata: { name: "n1" } }), {
    controller: true,
    blockOwnerDeletion: true,
    kind: "Node",
    name: "n1",
  });
  assert.deepEqual(buildOwnerReference({}), { controller: true, blockOwnerDeletion: true });
});

Deno.test("buildOwnerReference() ignores the namespace and other fields of the owner (HIER-06)", () => {
  const ref = buildOwnerReference(parent());
  assert.equal("namespace" in ref, false);
  assert.notEqual(buildOwnerReference(parent()), buildOwnerReference(parent()), "new objects");
});

// --- HIER-04: appendOwnerReference -----------------------------------------------------------

Deno.test("appendOwnerReference() appends to one object, creating the metadata (HIER-04)", () => {
  const obj: KubeObject = { kind: "Job" };
  appendOwnerReference(obj, parent());
  assert.deepEqual(obj, { kind: "Job", metadata: { ownerReferences: [OWNER_REF] } });
});

Deno.test("appendOwnerReference() appends to a list of objects, like Kopf's docs (HIER-01, HIER-04)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  appendOwnerReference(objs, parent());
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { ownerReferences: [OWNER_REF] } },
    { kind: "Deployment", metadata: { ownerReferences: [OWNER_REF] } },
  ]);
  assert.notEqual(
    objs[0]!.metadata!.ownerReferences![0],
    objs[1]!.metadata!.ownerReferences![0],
    "each object gets its own copy of the reference",
  );
});

Deno.test("appendOwnerReference() is idempotent by the owner's uid (HIER-04)", () => {
  const obj: KubeObject = { kind: "Job" };
  appendOwnerReference(obj, parent());
  appendOwnerReference(obj, parent());
  appendOwnerReference(obj, parent(), { controller: false }); // same uid: kept as it was
  assert.deepEqual(obj.metadata!.ownerReferences, [OWNER_REF]);
});

Deno.test("appendOwnerReference() keeps the references to other owners (HIER-04)", () => {
  const other = { apiVersion: "v1", kind: "Other", name: "o", uid: "other-uid" };
  const obj: KubeObject = { kind: "Job", metadata: { name: "j", ownerReferences: [other] } };
  const refs = obj.metadata!.ownerReferences!;
  appendOwnerReference(obj, parent());
  assert.equal(obj.metadata!.ownerReferences, refs, "the same array, appended in place");
  assert.deepEqual(obj.metadata, { name: "j", ownerReferences: [other, OWNER_REF] });
});

Deno.test("appendOwnerReference() passes the controller & blockOwnerDeletion flags (HIER-04)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }];
  appendOwnerReference(objs, parent(), { controller: false, blockOwnerDeletion: false });
  assert.deepEqual(objs[0]!.metadata!.ownerReferences, [
    { ...OWNER_REF, controller: false, blockOwnerDeletion: false },
  ]);
  const bare: KubeObject = {};
  appendOwnerReference(bare, parent(), { controller: null, blockOwnerDeletion: null });
  assert.deepEqual(bare.metadata!.ownerReferences, [
    { apiVersion: "kopf.dev/v1", kind: "KopfExample", name: "kopf-example-1", uid: UID },
  ]);
});

Deno.test("appendOwnerReference() requires an owner with a uid (HIER-04, HIER-10)", () => {
  const obj: KubeObject = { kind: "Job" };
  assert.throws(
    () => appendOwnerReference(obj, { kind: "KopfExample", metadata: { name: "x" } }),
    { name: "TypeError", message: /no metadata\.uid/ },
  );
  assert.deepEqual(obj, { kind: "Job" }, "nothing was modified");
});

Deno.test("appendOwnerReference() rejects wrongly typed metadata & references (HIER-04)", () => {
  assert.throws(
    () => appendOwnerReference({ metadata: "x" } as unknown as KubeObject, parent()),
    TypeError,
  );
  assert.throws(
    () => appendOwnerReference({ metadata: { ownerReferences: {} } } as KubeObject, parent()),
    { name: "TypeError", message: /ownerReferences is not an array/ },
  );
  const nulls = { metadata: null, spec: {} } as unknown as KubeObject;
  appendOwnerReference(nulls, parent());
  assert.deepEqual(nulls, { metadata: { ownerReferences: [OWNER_REF] }, spec: {} });
});

// --- HIER-05: removeOwnerReference -----------------------------------------------------------

Deno.test("removeOwnerReference() removes the owner's references by uid (HIER-05)", () => {
  const other = { apiVersion: "v1", kind: "Other", name: "o", uid: "other-uid" };
  const stale = { ...OWNER_REF, name: "renamed", controller: false };
  const objs: KubeObject[] = [
    { kind: "Job", metadata: { ownerReferences: [other, stale, OWNER_REF] } },
    { kind: "Deployment", metadata: { ownerReferences: [OWNER_REF] } },
  ];
  const refs = objs[0]!.metadata!.ownerReferences!;
  removeOwnerReference(objs, parent());
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { ownerReferences: [other] } },
    { kind: "Deployment", metadata: { ownerReferences: [] } },
  ]);
  assert.equal(objs[0]!.metadata!.ownerReferences, refs, "the same array, modified in place");
});

Deno.test("removeOwnerReference() leaves objects without the owner untouched (HIER-05)", () => {
  const other = { apiVersion: "v1", kind: "Other", name: "o", uid: "other-uid" };
  const objs: KubeObject[] = [
    { kind: "Job" },
    { kind: "Job", metadata: { name: "x" } },
    { kind: "Job", metadata: { ownerReferences: [other] } },
  ];
  const before = structuredClone(objs);
  removeOwnerReference(objs, parent());
  assert.deepEqual(objs, before, "no empty metadata or arrays are created");
});

Deno.test("removeOwnerReference() reverts appendOwnerReference() (HIER-04, HIER-05)", () => {
  const obj: KubeObject = { kind: "Job", metadata: { name: "j" } };
  appendOwnerReference(obj, parent());
  removeOwnerReference(obj, parent());
  assert.deepEqual(obj, { kind: "Job", metadata: { name: "j", ownerReferences: [] } });
});

Deno.test("removeOwnerReference() requires an owner with a uid (HIER-05, HIER-10)", () => {
  const obj: KubeObject = { metadata: { ownerReferences: [OWNER_REF] } };
  assert.throws(() => removeOwnerReference(obj, { metadata: { name: "x" } }), TypeError);
  assert.deepEqual(obj.metadata!.ownerReferences, [OWNER_REF]);
});
