import assert from "node:assert/strict";
import type { JsonValue } from "../core/structs/dicts.ts";
import { getCondition, setCondition } from "./conditions.ts";

const T0 = new Date("2026-01-01T10:00:00.123Z");
const T1 = new Date("2026-01-01T11:00:00Z");

Deno.test("setCondition() appends a new condition with observedGeneration and a transition time in seconds", () => {
  const conditions = setCondition(undefined, {
    type: "Ready",
    status: "False",
    reason: "Waiting",
  }, { generation: 2, now: T0 });
  assert.deepEqual(conditions, [{
    type: "Ready",
    status: "False",
    reason: "Waiting",
    message: "",
    observedGeneration: 2,
    lastTransitionTime: "2026-01-01T10:00:00Z",
  }]);
});

Deno.test("setCondition() keeps lastTransitionTime while the status stays, and moves it when the status changes", () => {
  const first = setCondition({}, { type: "Ready", status: "False", reason: "A" }, { now: T0 });
  const same = setCondition({ conditions: first }, {
    type: "Ready",
    status: "False",
    reason: "B",
    message: "still waiting",
  }, { now: T1, generation: 5 });
  assert.equal(same[0]!.lastTransitionTime, "2026-01-01T10:00:00Z");
  assert.equal(same[0]!.reason, "B");
  assert.equal(same[0]!.observedGeneration, 5);
  const flipped = setCondition({ conditions: same }, {
    type: "Ready",
    status: "True",
    reason: "Done",
  }, { now: T1 });
  assert.equal(flipped[0]!.lastTransitionTime, "2026-01-01T11:00:00Z");
  assert.equal(getCondition({ conditions: flipped }, "Ready")?.status, "True");
});

Deno.test("setCondition() leaves other conditions and the input untouched", () => {
  const status = Object.freeze({
    conditions: Object.freeze([
      Object.freeze({
        type: "Available",
        status: "True",
        reason: "X",
        message: "",
        lastTransitionTime: "t",
      }),
    ]),
  });
  const conditions = setCondition(status, { type: "Ready", status: "True", reason: "Y" }, {
    now: T0,
  });
  assert.deepEqual(conditions.map((c) => c.type), ["Available", "Ready"]);
  assert.equal(conditions[0], status.conditions[0]);
});

Deno.test("setCondition() rejects bad input with a clear error", () => {
  assert.throws(() => setCondition({}, { type: "", status: "True", reason: "X" }), /type/);
  assert.throws(() => setCondition({}, { type: "Ready", status: "True", reason: "" }), /reason/);
  assert.throws(
    () => setCondition({}, { type: "Ready", status: "yes" as "True", reason: "X" }),
    /True, False or Unknown/,
  );
});

Deno.test("setCondition()'s result is JSON-typed: it goes into a patch with no cast", () => {
  // A type check first (deno test checks it): Condition[] must be assignable to JsonValue.
  const value: JsonValue = setCondition({}, { type: "Ready", status: "True", reason: "Done" });
  assert.equal((value as Array<{ type: string }>)[0]?.type, "Ready");
});
