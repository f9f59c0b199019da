// Unit tests of the finalizer phases: added or removed in a cycle of their own.
import assert from "node:assert/strict";
import type { ChangingHandler } from "../../../intents/handlers.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { Patch } from "../../../structs/patches.ts";
import { changingHandler, cycleFixture, memoryOf, objectOf } from "./_test_support.ts";
import { endUnhandled, toggleFinalizer } from "./finalizers.ts";
import { openCycle } from "./opening.ts";
import type { ObjectEvent } from "./state.ts";

function setup(changing: ChangingHandler[], body: KubeObject, type: ObjectEvent["type"] = null) {
  const fixture = cycleFixture({ changing });
  const cycle = openCycle(fixture.deps, memoryOf(), { type, body }, new Patch());
  return { ...fixture, cycle };
}

const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

Deno.test("toggleFinalizer() adds the finalizer a delete handler needs, alone in its cycle", () => {
  const { deps, cycle } = setup([changingHandler("d", "delete")], objectOf());
  assert.equal(deps.settings.persistence.finalizer, FINALIZER);
  assert.deepEqual(toggleFinalizer(deps, cycle), { delay: 0 });
  assert.deepEqual(cycle.patch.jsonOps.filter((op) => op.op === "add"), [
    { op: "add", path: "/metadata/finalizers", value: [FINALIZER] },
  ]);
  assert.equal(cycle.cause?.reason, undefined, "no filter needed the cause");
});

Deno.test("toggleFinalizer() removes a finalizer that no handler needs", () => {
  const body = objectOf({ metadata: { finalizers: ["other", FINALIZER] } });
  const { deps, cycle } = setup([changingHandler("c", "create")], body);
  assert.deepEqual(toggleFinalizer(deps, cycle), { delay: 0 });
  assert.ok(cycle.patch.jsonOps.some((op) => op.op === "remove"), JSON.stringify(cycle.patch));
});

Deno.test("toggleFinalizer() goes on when the finalizer is as needed, or deletion is requested", () => {
  const present = objectOf({ metadata: { finalizers: [FINALIZER] } });
  const kept = setup([changingHandler("d", "delete")], present);
  assert.equal(toggleFinalizer(kept.deps, kept.cycle), undefined);
  assert.ok(kept.cycle.patch.isEmpty);
  const deleting = objectOf({ metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } });
  const late = setup([changingHandler("d", "delete")], deleting);
  assert.equal(toggleFinalizer(late.deps, late.cycle), undefined);
  assert.ok(late.cycle.patch.isEmpty);
});

Deno.test("toggleFinalizer() asks filters with the cause: an optional delete handler needs none", () => {
  const optional = changingHandler("d", "delete", undefined, { optional: true });
  const { deps, cycle } = setup([optional], objectOf());
  assert.equal(toggleFinalizer(deps, cycle), undefined);
  const when = changingHandler("w", "delete", undefined, {
    when: (({ reason }: { reason: string }) => reason === "create") as never,
  });
  const filtered = setup([when], objectOf());
  assert.deepEqual(toggleFinalizer(filtered.deps, filtered.cycle), { delay: 0 });
  assert.equal(filtered.cycle.cause?.reason, "create", "the filter saw the cause");
});

Deno.test("endUnhandled() ends a cycle with no changing handlers, removing a left finalizer", () => {
  const body = objectOf({ metadata: { finalizers: [FINALIZER] } });
  const { deps, cycle } = setup([], body);
  assert.deepEqual(endUnhandled(deps, cycle), { delay: undefined });
  assert.ok(cycle.patch.jsonOps.some((op) => op.op === "remove"));
  const handled = setup([changingHandler("c", "create")], body);
  assert.equal(endUnhandled(handled.deps, handled.cycle), undefined);
  const gone = setup([changingHandler("c", "create")], body, "DELETED");
  assert.deepEqual(endUnhandled(gone.deps, gone.cycle), { delay: undefined });
  assert.ok(gone.cycle.patch.isEmpty, "nothing is written to a gone object");
});
