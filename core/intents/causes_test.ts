import assert from "node:assert/strict";
import type { KubeObject } from "../structs/objects.ts";
import {
  type CauseInputs,
  detectChangingCause,
  hasFinalizer,
  isDeletionRequested,
} from "./causes.ts";

const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

function body(meta: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "kex", namespace: "ns", ...meta },
    spec: { field: "value" },
  } as KubeObject;
}

function inputs(overrides: Partial<CauseInputs>): CauseInputs {
  const essence = { spec: { field: "value" } };
  return {
    body: body(),
    deleted: false,
    finalizer: FINALIZER,
    old: essence,
    new: essence,
    initial: false,
    ...overrides,
  };
}

const DELETING = { deletionTimestamp: "2020-01-01T00:00:00Z" };

Deno.test("isDeletionRequested() follows metadata.deletionTimestamp (HK-CHG-05)", () => {
  assert.equal(isDeletionRequested(body()), false);
  assert.equal(isDeletionRequested(body(DELETING)), true);
  assert.equal(isDeletionRequested({}), false);
});

Deno.test("hasFinalizer() looks for the exact finalizer name (PST-51)", () => {
  assert.equal(hasFinalizer(body({ finalizers: [FINALIZER] }), FINALIZER), true);
  assert.equal(hasFinalizer(body({ finalizers: ["other"] }), FINALIZER), false);
  assert.equal(hasFinalizer(body(), FINALIZER), false);
});

Deno.test("detectChangingCause() gives 'gone' for a DELETED event before anything else (SUB-12)", () => {
  const cause = detectChangingCause(inputs({
    deleted: true,
    body: body({ ...DELETING, finalizers: [FINALIZER] }),
    old: undefined,
    new: { spec: { field: "changed" } },
  }));
  assert.equal(cause.reason, "gone");
  assert.deepEqual(cause.diff, []);
});

Deno.test("detectChangingCause() gives 'free' when deletion is requested without our finalizer (SUB-12)", () => {
  const cause = detectChangingCause(inputs({
    body: body({ ...DELETING, finalizers: ["someone.else/finalizer"] }),
    old: undefined,
  }));
  assert.equal(cause.reason, "free");
  assert.deepEqual(cause.diff, []);
});

Deno.test("detectChangingCause() gives 'delete' when deletion is requested with our finalizer (HK-CHG-05, SUB-12)", () => {
  const cause = detectChangingCause(inputs({
    body: body({ ...DELETING, finalizers: [FINALIZER] }),
    old: { spec: { field: "old" } },
    new: { spec: { field: "new" } },
    initial: true,
  }));
  assert.equal(cause.reason, "delete");
  assert.deepEqual(cause.diff, []);
  assert.equal(cause.initial, true);
});

Deno.test("detectChangingCause() gives 'create' without a diff-base, even when initial (HK-CHG-03, SUB-12)", () => {
  const essence = { spec: { field: "value" } };
  for (const initial of [false, true]) {
    const cause = detectChangingCause(inputs({ old: undefined, new: essence, initial }));
    assert.equal(cause.reason, "create");
    assert.equal(cause.initial, initial);
    assert.equal(cause.old, undefined);
    assert.equal(cause.new, essence);
    assert.deepEqual(cause.diff, [["add", [], null, essence]]);
  }
});

Deno.test("detectChangingCause() gives 'resume' for an unchanged object first seen by this process (HK-CHG-08, SUB-12)", () => {
  const cause = detectChangingCause(inputs({ initial: true }));
  assert.equal(cause.reason, "resume");
  assert.deepEqual(cause.diff, []);
});

Deno.test("detectChangingCause() gives 'noop' for an unchanged object already handled (HK-CHG-15, SUB-12)", () => {
  const cause = detectChangingCause(inputs({
    old: { spec: { field: "value" } },
    new: { spec: { field: "value" } },
    initial: false,
  }));
  assert.equal(cause.reason, "noop");
  assert.deepEqual(cause.diff, []);
});

Deno.test("detectChangingCause() gives 'update' with the essential diff (HK-CHG-04, SUB-12)", () => {
  const old = { spec: { field: "value", size: 1 } };
  const new_ = { spec: { field: "value", size: 2, extra: "x" } };
  const cause = detectChangingCause(inputs({ old, new: new_ }));
  assert.equal(cause.reason, "update");
  assert.equal(cause.initial, false);
  assert.equal(cause.old, old);
  assert.equal(cause.new, new_);
  assert.deepEqual(cause.diff, [
    ["add", ["spec", "extra"], null, "x"],
    ["change", ["spec", "size"], 1, 2],
  ]);
});

Deno.test("detectChangingCause() marks an update as initial when first seen, so resume handlers join (HK-CHG-09, SUB-12)", () => {
  const cause = detectChangingCause(inputs({
    old: { spec: { field: "a" } },
    new: { spec: { field: "b" } },
    initial: true,
  }));
  assert.equal(cause.reason, "update");
  assert.equal(cause.initial, true);
  assert.deepEqual(cause.diff, [["change", ["spec", "field"], "a", "b"]]);
});

Deno.test("detectChangingCause() ignores null-vs-absent differences in the essence (SUB-13)", () => {
  const cause = detectChangingCause(inputs({
    old: { spec: { field: "value", gone: null } },
    new: { spec: { field: "value" } },
    initial: false,
  }));
  assert.equal(cause.reason, "noop");
});
