import assert from "node:assert/strict";
import type { KubeObject } from "../structs/objects.ts";
import { refusedStandIn, type WatcherEvent } from "./watch_events.ts";
import { type ObjectEvent, objectEvents } from "./object_events.ts";

function item(name: string, rv: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv, ...extra },
    spec: { big: "x".repeat(1000) },
  };
}

async function fold(events: WatcherEvent[]): Promise<ObjectEvent[]> {
  async function* source() {
    yield* events;
  }
  const out: ObjectEvent[] = [];
  for await (const event of objectEvents(source())) out.push(event);
  return out;
}

Deno.test("objectEvents(): a relist flags unchanged objects and reports vanished ones as last seen, without the operators' annotations", async () => {
  const doomed = item("doomed", "11", {
    labels: { app: "demo" },
    annotations: {
      "example.com/owner": "team-a",
      "kopf.zalando.org/last-handled-configuration": '{"spec":{}}',
    },
    finalizers: ["kopf.zalando.org/KopfFinalizerMarker"],
  });
  const out = await fold([
    { type: "init" },
    { type: "initApply", object: item("keep", "10") },
    { type: "initApply", object: doomed },
    { type: "initDone", resourceVersion: "12" },
    { type: "apply", object: item("keep", "13"), raw: "MODIFIED" },
    // The watch was down: a relist without "doomed", "keep" unchanged since 13.
    { type: "init" },
    { type: "initApply", object: item("keep", "13") },
    { type: "initApply", object: item("born", "15") },
    { type: "initDone", resourceVersion: "16" },
  ]);
  assert.deepEqual(
    out.map((e) => [e.type, e.object.metadata?.name, e.type === "apply" && !!e.unchanged]),
    [
      ["apply", "keep", false],
      ["apply", "doomed", false],
      ["apply", "keep", false],
      ["apply", "keep", true],
      ["apply", "born", false],
      ["delete", "doomed", false],
    ],
  );
  assert.deepEqual(out.at(-1)!.object, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: {
      name: "doomed",
      namespace: "ns",
      uid: "uid-doomed",
      resourceVersion: "11",
      labels: { app: "demo" },
      annotations: { "example.com/owner": "team-a" },
      finalizers: ["kopf.zalando.org/KopfFinalizerMarker"],
    },
  });
});

Deno.test("objectEvents(): a re-created object (new uid) in a relist is not unchanged; cluster-scoped objects keep no namespace", async () => {
  const recreated = {
    ...item("x", "5"),
    metadata: { name: "x", uid: "other", resourceVersion: "5" },
  };
  const out = await fold([
    { type: "init" },
    {
      type: "initApply",
      object: { ...item("x", "5"), metadata: { name: "x", uid: "a", resourceVersion: "5" } },
    },
    {
      type: "initApply",
      object: { ...item("gone", "6"), metadata: { name: "gone", uid: "g", resourceVersion: "6" } },
    },
    { type: "initDone", resourceVersion: "7" },
    { type: "init" },
    { type: "initApply", object: recreated },
    { type: "initDone", resourceVersion: "8" },
  ]);
  assert.equal(out[2]?.type === "apply" && out[2].unchanged, undefined);
  assert.deepEqual(out[3]?.object.metadata, { name: "gone", uid: "g", resourceVersion: "6" });
});

Deno.test("objectEvents(): an object refused for its depth in a relist still exists: not reported deleted", async () => {
  const deep = item("deep", "11");
  const out = await fold([
    { type: "init" },
    { type: "initApply", object: deep },
    { type: "initDone", resourceVersion: "12" },
    // The watch was down; meanwhile the object was changed to be too deep.
    { type: "init" },
    { type: "refused", reason: "too deep", object: refusedStandIn(item("deep", "14")) },
    { type: "initDone", resourceVersion: "15" },
  ]);
  assert.deepEqual(out.map((e) => [e.type, e.object.metadata?.name]), [["apply", "deep"]]);
});

Deno.test("refusedStandIn(): apiVersion, kind and metadata without managedFields", () => {
  const object: KubeObject = {
    ...item("deep", "11"),
    metadata: { ...item("deep", "11").metadata, managedFields: [{ fieldsV1: { "f:spec": {} } }] },
  };
  assert.deepEqual(refusedStandIn(object), {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "deep", namespace: "ns", uid: "uid-deep", resourceVersion: "11" },
  });
  assert.ok(object.metadata?.managedFields, "the original is unchanged");
});
