/**
 * The hierarchies kit's naming, namespaces and `adopt()` (HIER-07 to HIER-09), what every
 * function accepts (HIER-01), and the handled object as the default owner (HIER-10).
 */

import assert from "node:assert/strict";
import { withHandledObject } from "../core/actions/handled_object.ts";
import {
  adjustNamespace,
  adopt,
  appendOwnerReference,
  harmonizeNaming,
  type KubeObject,
  type KubeObjects,
  label,
  removeOwnerReference,
} from "./hierarchies.ts";
import { OWNER_REF, parent } from "./_test_support.ts";

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
