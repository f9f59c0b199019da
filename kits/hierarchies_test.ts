import assert from "node:assert/strict";
import { withHandledObject } from "../core/actions/handled_object.ts";
import {
  adjustNamespace,
  adopt,
  appendOwnerReference,
  buildOwnerReference,
  harmonizeNaming,
  type KubeObject,
  type KubeObjects,
  label,
  removeOwnerReference,
} from "./hierarchies.ts";

const UID = "6b931859-5d50-4b5c-956b-ea2fed0d1058";

/** The parent of the examples in Kopf's docs. */
function parent(): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: {
      name: "kopf-example-1",
      namespace: "default",
      uid: UID,
      labels: { somelabel: "somevalue" },
    },
    spec: { field: "value" },
  };
}

const OWNER_REF = {
  controller: true,
  blockOwnerDeletion: true,
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  name: "kopf-example-1",
  uid: UID,
};

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

// --- HIER-02, HIER-03: label -----------------------------------------------------------------

Deno.test("label() adds explicit labels to every object, like Kopf's docs (HIER-01, HIER-02)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  label(objs, { label1: "value1", label2: "value2" });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { labels: { label1: "value1", label2: "value2" } } },
    { kind: "Deployment", metadata: { labels: { label1: "value1", label2: "value2" } } },
  ]);
});

Deno.test("label() keeps existing labels unless forced (HIER-02)", () => {
  const obj: KubeObject = { metadata: { labels: { label1: "old", other: "x" } } };
  label(obj, { label1: "new", label2: "value2" });
  assert.deepEqual(obj.metadata!.labels, { label1: "old", other: "x", label2: "value2" });
  label(obj, { label1: "new" }, { forced: true });
  assert.deepEqual(obj.metadata!.labels, { label1: "new", other: "x", label2: "value2" });
});

Deno.test("label() copies the owner's labels when none are given (HIER-02, HIER-10)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  label(objs, undefined, { owner: parent() });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { labels: { somelabel: "somevalue" } } },
    { kind: "Deployment", metadata: { labels: { somelabel: "somevalue" } } },
  ]);
  const viaNull: KubeObject = {};
  label(viaNull, null, { owner: parent() });
  assert.deepEqual(viaNull, { metadata: { labels: { somelabel: "somevalue" } } });
  assert.notEqual(viaNull.metadata!.labels, parent().metadata!.labels);
});

Deno.test("label() with forced, explicit then the owner's, like Kopf's docs (HIER-02)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  label(objs, { label1: "value1", somelabel: "not-this" }, { forced: true });
  label(objs, undefined, { owner: parent(), forced: true });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { labels: { label1: "value1", somelabel: "somevalue" } } },
    { kind: "Deployment", metadata: { labels: { label1: "value1", somelabel: "somevalue" } } },
  ]);
});

Deno.test("label() prefers explicit labels over the owner's (HIER-02)", () => {
  const obj: KubeObject = {};
  label(obj, { mine: "yes" }, { owner: parent() });
  assert.deepEqual(obj, { metadata: { labels: { mine: "yes" } } });
});

Deno.test("label() with empty labels, or an owner without labels, does nothing (HIER-02)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }];
  label(objs, {});
  label(objs, undefined, { owner: { metadata: { name: "unlabelled" } } });
  label(objs, undefined, { owner: {} });
  assert.deepEqual(objs, [{ kind: "Job" }]);
});

Deno.test("label() needs labels or an owner (HIER-02, HIER-10)", () => {
  assert.throws(() => label({}), { name: "TypeError", message: /labels explicitly, or an owner/ });
  assert.throws(() => label({}, null), TypeError);
});

Deno.test("label() stores null values as they are, for merge-patches (HIER-02)", () => {
  const patch: KubeObject = { metadata: { labels: { gone: "x" } } };
  label(patch, { gone: null }, { forced: true });
  assert.deepEqual(patch, { metadata: { labels: { gone: null } } });
});

Deno.test("label() treats special keys as ordinary labels (HIER-02)", () => {
  const obj: KubeObject = {};
  label(obj, JSON.parse('{"__proto__": "p", "constructor": "c"}'));
  const labels = obj.metadata!.labels!;
  assert.equal(Object.getPrototypeOf(labels), Object.prototype);
  assert.deepEqual(Object.keys(labels), ["__proto__", "constructor"]);
  assert.equal(Object.getOwnPropertyDescriptor(labels, "__proto__")?.value, "p");
});

Deno.test("label() labels existing nested structures, like Kopf's docs (HIER-03)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: {} } }];
  label(objs, { label1: "value1" }, { nested: "spec.template" });
  label(objs, undefined, { owner: parent(), nested: "spec.template" });
  const labels = { label1: "value1", somelabel: "somevalue" };
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { labels } },
    { kind: "Deployment", metadata: { labels }, spec: { template: { metadata: { labels } } } },
  ]);
});

Deno.test("label() accepts several nested fields, dotted or as key arrays (HIER-03)", () => {
  const cronJob: KubeObject = {
    kind: "CronJob",
    spec: {
      jobTemplate: { spec: { template: { metadata: { labels: { keep: "me" } } } } },
      "dotted.key": {},
    },
  };
  label(cronJob, { keep: "not-me", a: "b" }, {
    nested: ["spec.jobTemplate", "spec.jobTemplate.spec.template", ["spec", "dotted.key"]],
  });
  assert.deepEqual(cronJob, {
    kind: "CronJob",
    metadata: { labels: { keep: "not-me", a: "b" } },
    spec: {
      jobTemplate: {
        metadata: { labels: { keep: "not-me", a: "b" } },
        spec: { template: { metadata: { labels: { keep: "me", a: "b" } } } },
      },
      "dotted.key": { metadata: { labels: { keep: "not-me", a: "b" } } },
    },
  });
});

Deno.test("label() applies forced to the nested structures too (HIER-03)", () => {
  const obj: KubeObject = { spec: { template: { metadata: { labels: { a: "old" } } } } };
  label(obj, { a: "new" }, { nested: "spec.template", forced: true });
  assert.deepEqual(obj, {
    metadata: { labels: { a: "new" } },
    spec: { template: { metadata: { labels: { a: "new" } } } },
  });
});

Deno.test("label() creates no absent nested structures (HIER-03)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Job", spec: {} }];
  label(objs, { a: "b" }, { nested: ["spec.template", "spec.absent.deeper"] });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { labels: { a: "b" } } },
    { kind: "Job", metadata: { labels: { a: "b" } }, spec: {} },
  ]);
});

Deno.test("label() rejects nested fields that are not objects, before labelling (HIER-03)", () => {
  const objs: KubeObject[] = [{ kind: "A" }, { kind: "B", spec: { template: null } }];
  assert.throws(
    () => label(objs, { a: "b" }, { nested: "spec.template" }),
    { name: "TypeError", message: /spec\.template is not an object: null/ },
  );
  assert.throws(
    () => label({ spec: "text" }, { a: "b" }, { nested: "spec.template" }),
    { name: "TypeError", message: /spec is not an object/ },
  );
  assert.deepEqual(objs[0], { kind: "A" }, "nothing was modified");
});

Deno.test("label() with a nested null field labels the root once more, harmlessly (HIER-03)", () => {
  const obj: KubeObject = {};
  label(obj, { a: "b" }, { nested: [null] });
  assert.deepEqual(obj, { metadata: { labels: { a: "b" } } });
});

Deno.test("label() labels a nested structure alone when it is passed directly (HIER-03)", () => {
  const deployment = { kind: "Deployment", spec: { template: {} as KubeObject } };
  label(deployment.spec.template, { a: "b" });
  assert.deepEqual(deployment, {
    kind: "Deployment",
    spec: { template: { metadata: { labels: { a: "b" } } } },
  });
});

Deno.test("label() rejects wrongly typed labels (HIER-02)", () => {
  assert.throws(
    () => label({ metadata: { labels: [] } } as unknown as KubeObject, { a: "b" }),
    { name: "TypeError", message: /labels is not an object/ },
  );
});

// --- HIER-07: harmonizeNaming ----------------------------------------------------------------

Deno.test("harmonizeNaming() sets a generateName prefix by default (HIER-07)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  harmonizeNaming(objs, "some-name");
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { generateName: "some-name-" } },
    { kind: "Deployment", metadata: { generateName: "some-name-" } },
  ]);
});

Deno.test("harmonizeNaming() sets the exact name when strict (HIER-07)", () => {
  const obj: KubeObject = { kind: "Job" };
  harmonizeNaming(obj, "some-name", { strict: true });
  assert.deepEqual(obj, { kind: "Job", metadata: { name: "some-name" } });
});

Deno.test("harmonizeNaming() keeps existing names and prefixes unless forced (HIER-07)", () => {
  const objs: KubeObject[] = [
    { metadata: { name: "own" } },
    { metadata: { generateName: "own-" } },
    { metadata: { namespace: "ns" } },
  ];
  harmonizeNaming(objs, "some-name");
  harmonizeNaming(objs, "other-name", { strict: true });
  assert.deepEqual(objs, [
    { metadata: { name: "own" } },
    { metadata: { generateName: "own-" } },
    { metadata: { namespace: "ns", generateName: "some-name-" } },
  ]);
});

Deno.test("harmonizeNaming() with forced replaces name by prefix and back (HIER-07)", () => {
  const objs: KubeObject[] = [{ metadata: { name: "own" } }, {
    metadata: { generateName: "own-" },
  }];
  harmonizeNaming(objs, "some-name", { forced: true });
  assert.deepEqual(objs, [
    { metadata: { generateName: "some-name-" } },
    { metadata: { generateName: "some-name-" } },
  ]);
  harmonizeNaming(objs, "some-name", { forced: true, strict: true });
  assert.deepEqual(objs, [{ metadata: { name: "some-name" } }, {
    metadata: { name: "some-name" },
  }]);
});

Deno.test("harmonizeNaming() takes the owner's name when none is given (HIER-07, HIER-10)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  harmonizeNaming(objs, undefined, { owner: parent(), forced: true, strict: true });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { name: "kopf-example-1" } },
    { kind: "Deployment", metadata: { name: "kopf-example-1" } },
  ]);
  const prefixed: KubeObject[] = [{ kind: "Job" }];
  harmonizeNaming(prefixed, null, { owner: parent() });
  assert.deepEqual(prefixed, [{ kind: "Job", metadata: { generateName: "kopf-example-1-" } }]);
  const explicit: KubeObject = {};
  harmonizeNaming(explicit, "mine", { owner: parent() });
  assert.deepEqual(explicit, { metadata: { generateName: "mine-" } });
});

Deno.test("harmonizeNaming() treats null names as absent (HIER-07)", () => {
  const obj = { metadata: { name: null, generateName: null } } as unknown as KubeObject;
  harmonizeNaming(obj, "n");
  assert.deepEqual(obj, { metadata: { generateName: "n-" } });
});

Deno.test("harmonizeNaming() fails when no name can be found (HIER-07, HIER-10)", () => {
  const obj: KubeObject = {};
  assert.throws(() => harmonizeNaming(obj), { name: "TypeError", message: /name explicitly/ });
  assert.throws(
    () => harmonizeNaming(obj, undefined, { owner: { kind: "Nameless" } }),
    { name: "TypeError", message: /owner has no metadata\.name/ },
  );
  assert.deepEqual(obj, {});
});

// --- HIER-08: adjustNamespace ----------------------------------------------------------------

Deno.test("adjustNamespace() sets the namespace where there is none (HIER-08)", () => {
  const objs: KubeObject[] = [
    { kind: "Job" },
    { kind: "Job", metadata: { name: "x" } },
    { kind: "Job", metadata: { namespace: "other" } },
  ];
  adjustNamespace(objs, "namespace");
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { namespace: "namespace" } },
    { kind: "Job", metadata: { name: "x", namespace: "namespace" } },
    { kind: "Job", metadata: { namespace: "other" } },
  ]);
});

Deno.test("adjustNamespace() overwrites the namespace when forced (HIER-08)", () => {
  const obj: KubeObject = { metadata: { namespace: "other" } };
  adjustNamespace(obj, "namespace", { forced: true });
  assert.deepEqual(obj, { metadata: { namespace: "namespace" } });
});

Deno.test("adjustNamespace() takes the owner's namespace, like Kopf's docs (HIER-08, HIER-10)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, {
    kind: "Deployment",
    metadata: { namespace: "x" },
  }];
  adjustNamespace(objs, undefined, { owner: parent(), forced: true });
  assert.deepEqual(objs, [
    { kind: "Job", metadata: { namespace: "default" } },
    { kind: "Deployment", metadata: { namespace: "default" } },
  ]);
  const viaNull: KubeObject = {};
  adjustNamespace(viaNull, null, { owner: parent() });
  assert.deepEqual(viaNull, { metadata: { namespace: "default" } });
  const explicit: KubeObject = {};
  adjustNamespace(explicit, "mine", { owner: parent() });
  assert.deepEqual(explicit, { metadata: { namespace: "mine" } });
});

Deno.test("adjustNamespace() with a cluster-scoped owner removes namespaces only if forced (HIER-08)", () => {
  const clusterOwner: KubeObject = { kind: "Node", metadata: { name: "n1", uid: "u" } };
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Job", metadata: { namespace: "x" } }];
  adjustNamespace(objs, undefined, { owner: clusterOwner });
  assert.deepEqual(objs, [{ kind: "Job" }, { kind: "Job", metadata: { namespace: "x" } }]);
  adjustNamespace(objs, undefined, { owner: clusterOwner, forced: true });
  assert.deepEqual(objs, [{ kind: "Job" }, { kind: "Job", metadata: {} }]);
});

Deno.test("adjustNamespace() needs a namespace or an owner (HIER-08, HIER-10)", () => {
  assert.throws(() => adjustNamespace({}), { name: "TypeError", message: /namespace explicitly/ });
  assert.throws(() => adjustNamespace({}, null, { forced: true }), TypeError);
});

// --- HIER-09: adopt --------------------------------------------------------------------------

Deno.test("adopt() owns, names, places and labels the children (HIER-09)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
  adopt(objs, parent());
  const metadata = {
    ownerReferences: [OWNER_REF],
    generateName: "kopf-example-1-",
    namespace: "default",
    labels: { somelabel: "somevalue" },
  };
  assert.deepEqual(objs, [{ kind: "Job", metadata }, { kind: "Deployment", metadata }]);
  assert.deepEqual(Object.keys(objs[0]!.metadata!), Object.keys(metadata), "Kopf's order");
});

Deno.test("adopt() with strict, forced and nested, like Kopf's docs (HIER-09)", () => {
  const objs: KubeObject[] = [
    {
      kind: "Job",
      metadata: { generateName: "own-", namespace: "other", labels: { somelabel: "x" } },
    },
    { kind: "Deployment", spec: { template: { metadata: { labels: { somelabel: "y" } } } } },
  ];
  adopt(objs, parent(), { strict: true, forced: true, nested: "spec.template" });
  const metadata = {
    ownerReferences: [OWNER_REF],
    name: "kopf-example-1",
    namespace: "default",
    labels: { somelabel: "somevalue" },
  };
  assert.deepEqual(objs, [
    { kind: "Job", metadata },
    {
      kind: "Deployment",
      metadata,
      spec: { template: { metadata: { labels: { somelabel: "somevalue" } } } },
    },
  ]);
});

Deno.test("adopt() keeps the children's own name, namespace & labels unless forced (HIER-09)", () => {
  const child: KubeObject = {
    kind: "Job",
    metadata: { name: "own", namespace: "other", labels: { somelabel: "mine" } },
    spec: { template: {} },
  };
  adopt(child, parent(), { strict: true, nested: "spec.template" });
  assert.deepEqual(child, {
    kind: "Job",
    metadata: {
      name: "own",
      namespace: "other",
      labels: { somelabel: "mine" },
      ownerReferences: [OWNER_REF],
    },
    spec: { template: { metadata: { labels: { somelabel: "somevalue" } } } },
  });
});

Deno.test("adopt() is idempotent (HIER-09)", () => {
  const once: KubeObject = { kind: "Job" };
  adopt(once, parent());
  const twice = structuredClone(once);
  adopt(twice, parent());
  assert.deepEqual(twice, once);
});

Deno.test("adopt() with an owner without labels adds no labels (HIER-09)", () => {
  const owner = parent();
  delete owner.metadata!.labels;
  const child: KubeObject = { kind: "Job" };
  adopt(child, owner);
  assert.deepEqual(child.metadata, {
    ownerReferences: [OWNER_REF],
    generateName: "kopf-example-1-",
    namespace: "default",
  });
});

Deno.test("adopt() validates the owner and the objects before modifying any (HIER-09, HIER-10)", () => {
  const child: KubeObject = { kind: "Job" };
  const noUid = parent();
  delete noUid.metadata!.uid;
  assert.throws(() => adopt(child, noUid), { name: "TypeError", message: /metadata\.uid/ });
  const noName = parent();
  delete noName.metadata!.name;
  assert.throws(() => adopt(child, noName), { name: "TypeError", message: /metadata\.name/ });
  assert.throws(() => adopt([child, "pod" as unknown as KubeObject], parent()), TypeError);
  assert.deepEqual(child, { kind: "Job" }, "nothing was modified");
});

Deno.test("adopt() validates nested fields before modifying anything (HIER-03, HIER-09)", () => {
  const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: "x" } }];
  assert.throws(() => adopt(objs, parent(), { nested: "spec.template" }), TypeError);
  assert.deepEqual(objs[0], { kind: "Job" }, "nothing was modified");
});

Deno.test("adopt() applies all four steps to one-shot iterables (HIER-01, HIER-09)", () => {
  const child: KubeObject = { kind: "Job" };
  function* children(): Generator<KubeObject> {
    yield child;
  }
  adopt(children(), parent());
  assert.deepEqual(child.metadata, {
    ownerReferences: [OWNER_REF],
    generateName: "kopf-example-1-",
    namespace: "default",
    labels: { somelabel: "somevalue" },
  });
});

Deno.test("adopt() does not modify the owner (HIER-09)", () => {
  const owner = parent();
  const before = structuredClone(owner);
  adopt([{}, {}], owner, { forced: true, strict: true, nested: "spec" });
  assert.deepEqual(owner, before);
});

// --- HIER-01: objects and collections --------------------------------------------------------

Deno.test("all functions accept iterables of objects and skip null items (HIER-01)", () => {
  const a: KubeObject = { kind: "A" };
  const b: KubeObject = { kind: "B" };
  const c: KubeObject = { kind: "C" };
  function* more(): Generator<KubeObject> {
    yield c;
  }
  const objs: KubeObjects = [a, [null, b], undefined, more()];
  label(objs, { x: "y" });
  harmonizeNaming(objs, "n");
  adjustNamespace(objs, "ns");
  appendOwnerReference(objs, parent());
  for (const obj of [a, b]) {
    assert.deepEqual(obj.metadata, {
      labels: { x: "y" },
      generateName: "n-",
      namespace: "ns",
      ownerReferences: [OWNER_REF],
    });
  }
  assert.deepEqual(c.metadata, { labels: { x: "y" } }, "the generator was consumed by label()");
  removeOwnerReference(new Set([a, b]), parent());
  assert.deepEqual(a.metadata!.ownerReferences, []);
  assert.deepEqual(b.metadata!.ownerReferences, []);
});

Deno.test("all functions flatten iterables to any depth at runtime (HIER-01)", () => {
  const a: KubeObject = { kind: "A" };
  const deep = [[[[a]], new Set([[null]])]] as unknown as KubeObjects; // typed: two levels only
  adopt(deep, parent(), { nested: "spec.template" });
  assert.deepEqual(a.metadata?.ownerReferences, [OWNER_REF]);
  assert.equal(a.metadata?.generateName, "kopf-example-1-");
});

Deno.test("all functions accept empty collections (HIER-01)", () => {
  for (const objs of [[], [[]], [null]]) {
    label(objs, { a: "b" });
    harmonizeNaming(objs, "n");
    adjustNamespace(objs, "ns");
    appendOwnerReference(objs, parent());
    removeOwnerReference(objs, parent());
    adopt(objs, parent());
  }
});

Deno.test("the same object listed twice is processed idempotently (HIER-01)", () => {
  const obj: KubeObject = {};
  adopt([obj, obj], parent());
  assert.equal(obj.metadata!.ownerReferences!.length, 1);
});

Deno.test("all functions reject items that are not plain objects (HIER-01)", () => {
  class Pod {
    metadata = {};
  }
  const bad: unknown[] = ["pod", 42, true, new Pod(), new Map([["kind", "Pod"]])];
  for (const item of bad) {
    const objs = [{}, item] as KubeObject[];
    assert.throws(() => label(objs, { a: "b" }), TypeError, String(item));
    assert.throws(() => harmonizeNaming(objs, "n"), TypeError);
    assert.throws(() => adjustNamespace(objs, "ns"), TypeError);
    assert.throws(() => appendOwnerReference(objs, parent()), TypeError);
    assert.throws(() => removeOwnerReference(objs, parent()), TypeError);
    assert.throws(() => adopt(objs, parent()), TypeError);
    assert.deepEqual(objs[0], {}, "validated before modifying");
  }
  // @ts-expect-error: a string is neither an object nor a collection of objects
  assert.throws(() => label("pod", { a: "b" }), TypeError);
  // @ts-expect-error: numbers are not objects
  assert.throws(() => adopt([1, 2], parent()), TypeError);
  assert.throws(() => label([new Pod()] as KubeObject[], { a: "b" }), {
    message: /instance of Pod/,
  });
});

Deno.test("objects without a prototype are plain objects too (HIER-01)", () => {
  const obj = Object.create(null) as KubeObject;
  adopt(obj, parent());
  assert.equal(obj.metadata!.name, undefined);
  assert.equal(obj.metadata!.generateName, "kopf-example-1-");
});

Deno.test("adopt() & co. default to the object being handled, and fail clearly outside handlers (HIER-10, HIST-35)", async () => {
  const owner = parent();
  const children: KubeObject[] = [{ kind: "Job" }, { kind: "Pod" }, { kind: "Secret" }];
  await withHandledObject({ body: owner }, async () => {
    await Promise.resolve(); // the handled object survives awaits
    adopt(children[0]!);
    appendOwnerReference(children[1]!);
    label(children[1]!);
    harmonizeNaming(children[1]!);
    adjustNamespace(children[1]!);
    appendOwnerReference(children[2]!);
    removeOwnerReference(children[2]!);
  });
  const explicit: KubeObject = { kind: "Job" };
  adopt(explicit, owner);
  assert.deepEqual(children[0], explicit, "adopt(child) in a handler = adopt(child, body)");
  assert.deepEqual(
    children[1],
    { ...explicit, kind: "Pod" },
    "each defaults to the handled object",
  );
  assert.deepEqual(children[2]!.metadata?.ownerReferences, []);

  // An explicit owner wins over the handled object.
  const other = { ...parent(), metadata: { name: "other", uid: "other-uid" } };
  const child: KubeObject = { kind: "Job" };
  withHandledObject({ body: owner }, () => adopt(child, other));
  assert.equal(child.metadata?.ownerReferences?.[0]?.uid, "other-uid");

  // Outside handlers, nothing to default to.
  for (
    const call of [
      () => adopt({}),
      () => appendOwnerReference({}),
      () => removeOwnerReference({}),
      () => label({}),
      () => harmonizeNaming({}),
      () => adjustNamespace({}),
    ]
  ) {
    assert.throws(call, { name: "TypeError", message: /explicitly.*in a handler/ });
  }
});
