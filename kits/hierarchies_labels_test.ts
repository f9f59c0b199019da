/**
 * The hierarchies kit's `label()`: explicit, forced and the owner's labels, and labels of
 * nested structures (HIER-02, HIER-03).
 */

import assert from "node:assert/strict";
import { type KubeObject, label } from "./hierarchies.ts";
import { parent } from "./_test_support.ts";

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
