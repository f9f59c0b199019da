import assert from "node:assert/strict";
import { inconsistencies, Patch } from "./patches.ts";

Deno.test("Patch is empty when new and after touching sections only", () => {
  const patch = new Patch();
  assert.equal(patch.isEmpty, true);
  for (const section of [patch.status, patch.spec, patch.labels, patch.annotations]) {
    assert.deepEqual(section, {});
  }
  assert.equal(patch.isEmpty, true);
  assert.deepEqual(patch.toRequests({ statusSubresource: false }), {
    merge: null,
    statusMerge: null,
    json: null,
  });
  assert.deepEqual(patch.toJSON(), {});
});

Deno.test("Patch sections write into one merge-patch body", () => {
  const patch = new Patch();
  patch.status["create_fn"] = { message: "hello" };
  patch.spec["size"] = 2;
  patch.labels["app"] = "demo";
  patch.annotations["example.com/gone"] = null;
  patch.metadata["finalizersNote"] = "x";
  assert.equal(patch.isEmpty, false);
  assert.deepEqual(patch.body, {
    status: { create_fn: { message: "hello" } },
    spec: { size: 2 },
    metadata: {
      labels: { app: "demo" },
      annotations: { "example.com/gone": null },
      finalizersNote: "x",
    },
  });
});

Deno.test("Patch.toRequests() keeps status in the main body without a status subresource", () => {
  const patch = new Patch({ spec: { a: 1 } });
  patch.status["x"] = 1;
  const requests = patch.toRequests({ statusSubresource: false });
  assert.deepEqual(requests.merge, { spec: { a: 1 }, status: { x: 1 } });
  assert.equal(requests.statusMerge, null);
});

Deno.test("Patch.toRequests() moves status to its own request with a status subresource", () => {
  const patch = new Patch();
  patch.status["x"] = 1;
  assert.deepEqual(patch.toRequests({ statusSubresource: true }), {
    merge: null,
    statusMerge: { status: { x: 1 } },
    json: null,
  });
  patch.annotations["a"] = "b";
  assert.deepEqual(patch.toRequests({ statusSubresource: true }).merge, {
    metadata: { annotations: { a: "b" } },
  });
});

Deno.test("Patch.toRequests() returns copies that do not alias the patch", () => {
  const patch = new Patch();
  patch.status["x"] = { y: 1 };
  const requests = patch.toRequests({ statusSubresource: true });
  (requests.statusMerge!.status as { x: { y: number } }).x.y = 2;
  assert.deepEqual(patch.status, { x: { y: 1 } });
});

Deno.test("Patch.addFinalizer() tests for absence before creating the list", () => {
  const patch = new Patch();
  patch.addFinalizer({ metadata: {} }, "kopf.zalando.org/KopfFinalizerMarker");
  assert.deepEqual(patch.toRequests({ statusSubresource: false }).json, [
    { op: "test", path: "/metadata/finalizers", value: null },
    { op: "add", path: "/metadata/finalizers", value: ["kopf.zalando.org/KopfFinalizerMarker"] },
  ]);
  assert.equal(patch.isEmpty, false);
});

Deno.test("Patch.addFinalizer() appends to an existing list guarded by a test of it", () => {
  const patch = new Patch();
  const body = { metadata: { finalizers: ["other"] } };
  patch.addFinalizer(body, "mine");
  patch.addFinalizer(body, "mine");
  patch.addFinalizer(body, "second");
  assert.deepEqual(patch.jsonOps, [
    { op: "test", path: "/metadata/finalizers", value: ["other"] },
    { op: "add", path: "/metadata/finalizers/-", value: "mine" },
    { op: "test", path: "/metadata/finalizers", value: ["other", "mine"] },
    { op: "add", path: "/metadata/finalizers/-", value: "second" },
  ]);
});

Deno.test("Patch.addFinalizer() does nothing when the finalizer is there", () => {
  const patch = new Patch();
  patch.addFinalizer({ metadata: { finalizers: ["mine"] } }, "mine");
  assert.equal(patch.isEmpty, true);
});

Deno.test("Patch.removeFinalizer() removes each occurrence by index with a test", () => {
  const patch = new Patch();
  patch.removeFinalizer({ metadata: { finalizers: ["a", "mine", "b", "mine"] } }, "mine");
  patch.removeFinalizer({}, "absent");
  assert.deepEqual(patch.toRequests({ statusSubresource: false, resourceVersion: "42" }).json, [
    { op: "test", path: "/metadata/resourceVersion", value: "42" },
    { op: "test", path: "/metadata/finalizers/1", value: "mine" },
    { op: "remove", path: "/metadata/finalizers/1" },
    { op: "test", path: "/metadata/finalizers/2", value: "mine" },
    { op: "remove", path: "/metadata/finalizers/2" },
  ]);
});

Deno.test("Patch.removeFinalizer() on an object without finalizers does nothing", () => {
  const patch = new Patch();
  patch.removeFinalizer({ metadata: {} }, "mine");
  assert.equal(patch.isEmpty, true);
});

Deno.test("Patch.toJsonPatch() expresses merge changes and finalizers against a body", () => {
  const body = {
    metadata: { name: "x", finalizers: ["other"], annotations: { old: "1" } },
    spec: { a: 1, list: [1, 2] },
  };
  const patch = new Patch();
  patch.spec["a"] = 2;
  patch.spec["list"] = [1];
  patch.annotations["old"] = null;
  patch.annotations["absent"] = null;
  patch.addFinalizer(body, "mine");
  const ops = patch.toJsonPatch(body);
  assert.ok(ops.every((op) => op.op !== "test"));
  assert.deepEqual(
    new Set(ops.map((op) => JSON.stringify(op))),
    new Set([
      JSON.stringify({ op: "remove", path: "/spec/list/1" }),
      JSON.stringify({ op: "replace", path: "/spec/a", value: 2 }),
      JSON.stringify({ op: "remove", path: "/metadata/annotations/old" }),
      JSON.stringify({ op: "add", path: "/metadata/finalizers/1", value: "mine" }),
    ]),
  );
  assert.deepEqual(new Patch().toJsonPatch(body), []);
});

Deno.test("Patch.clear() forgets merge content and operations", () => {
  const patch = new Patch({ spec: { a: 1 } });
  patch.addFinalizer({}, "mine");
  patch.clear();
  assert.equal(patch.isEmpty, true);
  assert.deepEqual(patch.body, {});
});

Deno.test("Patch sections refuse to descend into non-objects", () => {
  const patch = new Patch({ status: null });
  assert.throws(() => patch.status, TypeError);
});

Deno.test("inconsistencies() is empty when the result has everything the patch asked for", () => {
  const merge = {
    metadata: { annotations: { "a/b": "1", "a/gone": null }, labels: { app: "x" } },
    status: { fn: { message: "hi", n: 2 } },
    spec: { size: 3, absent: null },
  };
  const result = {
    metadata: { name: "n", annotations: { "a/b": "1", other: "o" }, labels: { app: "x" } },
    spec: { size: 3, more: true },
    status: { fn: { message: "hi", n: 2 }, unrelated: 1 },
  };
  assert.deepEqual(inconsistencies(merge, result), []);
});

Deno.test("inconsistencies() lists pruned, changed and undeleted fields with their paths", () => {
  const merge = { status: { fn: { x: 1 }, kept: "a" }, spec: { size: 3, gone: null } };
  const result = { status: { kept: "b" }, spec: { size: 3, gone: "still" } };
  assert.deepEqual(inconsistencies(merge, result), [
    ["remove", ["status", "fn"], { x: 1 }, null],
    ["change", ["status", "kept"], "a", "b"],
    ["add", ["spec", "gone"], null, "still"],
  ]);
});

Deno.test("inconsistencies() ignores empty finalizers, labels and annotations dropped by the server", () => {
  const merge = { metadata: { finalizers: [], labels: {}, annotations: {} }, spec: { empty: {} } };
  assert.deepEqual(inconsistencies(merge, { metadata: { name: "n" } }), [
    ["remove", ["spec"], { empty: {} }, null],
  ]);
  // A non-empty list that did not arrive is still reported.
  assert.deepEqual(inconsistencies({ metadata: { finalizers: ["f"] } }, { metadata: {} }), [
    ["remove", ["metadata", "finalizers"], ["f"], null],
  ]);
});

Deno.test("Patch.fns make the patch non-empty, turn into JSON-patch operations, and are cleared (K26-06)", () => {
  const patch = new Patch();
  patch.fns.push((body) => {
    (body.spec as { items: string[] }).items.push("b");
  });
  assert.equal(patch.isEmpty, false);
  const body = { spec: { items: ["a"] } };
  assert.deepEqual(patch.fnsAsJsonPatch(body), [{ op: "add", path: "/spec/items/1", value: "b" }]);
  assert.deepEqual(body, { spec: { items: ["a"] } }, "the body itself is not touched");
  patch.status["x"] = 1;
  assert.deepEqual(patch.toJsonPatch(body), [
    { op: "add", path: "/spec/items/1", value: "b" },
    { op: "add", path: "/status", value: { x: 1 } },
  ]);
  assert.equal(patch.toRequests({ statusSubresource: false }).json, null, "not finalizer ops");
  patch.clear();
  assert.equal(patch.isEmpty, true);
  assert.deepEqual(patch.fnsAsJsonPatch(body), []);
});

Deno.test("Patch.isEmpty agrees with the pruned body for every mix of empty and filled sections", () => {
  const fills: Array<(p: Patch) => void> = [
    () => {},
    (p) => void p.metadata,
    (p) => void p.labels,
    (p) => void p.annotations,
    (p) => void p.spec,
    (p) => void p.status,
    (p) => (p.labels["a"] = "1"),
    (p) => (p.annotations["a"] = null),
    (p) => (p.metadata["finalizers"] = []),
    (p) => (p.spec["x"] = {}),
    (p) => (p.status["x"] = 1),
    (p) => (p.body["status"] = null),
    (p) => (p.body["data"] = { a: "b" }),
  ];
  for (const [i, first] of fills.entries()) {
    for (const second of fills.slice(i)) {
      const patch = new Patch();
      first(patch);
      second(patch);
      assert.equal(
        patch.isEmpty,
        Object.keys(patch.toJSON()).length === 0,
        JSON.stringify(patch.body),
      );
    }
  }
});
