// Unit tests of the causation phase: the cause from the body and the operator's memory.
import assert from "node:assert/strict";
import { createSettings } from "../../../settings/settings.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { Patch } from "../../../structs/patches.ts";
import {
  changingHandler,
  FakeApi,
  memoryOf,
  NO_CLIENT,
  objectOf,
  RESOURCE,
  withDiffBase,
} from "./_test_support.ts";
import { causeOf, detectCause } from "./causation.ts";
import { openCycle } from "./opening.ts";
import type { ObjectEvent } from "./state.ts";
import { Logger } from "../../../actions/loggers.ts";
import { Indexers } from "../../../engines/runners/indexing.ts";

const settings = createSettings();
const FINALIZER = settings.persistence.finalizer;

function depsWith(changing = [changingHandler("h", "create")]) {
  return {
    resource: RESOURCE,
    settings,
    signal: new AbortController().signal,
    client: NO_CLIENT,
    indexers: new Indexers([]),
    changing,
    spawning: [],
    api: new FakeApi().api,
    logger: new Logger(["kopf", "test"]),
  };
}

function cycleOf(body: KubeObject, handledOnce: boolean, type: ObjectEvent["type"] = "MODIFIED") {
  const deps = depsWith();
  return openCycle(deps, memoryOf(handledOnce), { type, body }, new Patch());
}

Deno.test("causeOf() tells create, update, resume, noop from the diff-base and the memory", () => {
  const fresh = objectOf();
  assert.equal(causeOf({ settings }, cycleOf(fresh, false)).reason, "create");
  const handled = withDiffBase(settings, fresh);
  assert.equal(causeOf({ settings }, cycleOf(handled, false)).reason, "resume");
  assert.equal(causeOf({ settings }, cycleOf(handled, true)).reason, "noop");
  const changed = { ...handled, spec: { field: "other" } } as KubeObject;
  const update = causeOf({ settings }, cycleOf(changed, true));
  assert.equal(update.reason, "update");
  assert.deepEqual(update.diff, [["change", ["spec", "field"], "value", "other"]]);
});

Deno.test("causeOf() tells delete, free and gone from the deletion mark and the event", () => {
  const deleting = (finalizers: string[]) =>
    withDiffBase(
      settings,
      objectOf({ metadata: { deletionTimestamp: "2026-01-01T00:00:00Z", finalizers } }),
    );
  assert.equal(causeOf({ settings }, cycleOf(deleting([FINALIZER]), true)).reason, "delete");
  assert.equal(causeOf({ settings }, cycleOf(deleting([]), true)).reason, "free");
  assert.equal(causeOf({ settings }, cycleOf(objectOf(), true, "DELETED")).reason, "gone");
});

Deno.test("causeOf() detects once per cycle: a filter's early look is the cause used later", () => {
  const cycle = cycleOf(objectOf(), false);
  const first = causeOf({ settings }, cycle);
  cycle.memory.handledOnce = true; // would make it a different cause if detected again
  assert.equal(causeOf({ settings }, cycle), first);
});

Deno.test("detectCause() ends the cycle on noop and remembers the object as handled", () => {
  const cycle = cycleOf(withDiffBase(settings, objectOf()), true);
  assert.deepEqual(detectCause(depsWith(), cycle), { delay: undefined });
  assert.equal(cycle.cause?.reason, "noop");
  assert.equal(cycle.memory.handledOnce, true);
  assert.ok(cycle.patch.isEmpty);
});

Deno.test("detectCause() goes on with a create, update or resume", () => {
  const created = cycleOf(objectOf(), false);
  assert.equal(detectCause(depsWith(), created), undefined);
  assert.equal(created.cause?.reason, "create");
  assert.equal(created.memory.handledOnce, false);
  const resumed = cycleOf(withDiffBase(settings, objectOf()), false);
  assert.equal(detectCause(depsWith(), resumed), undefined);
  assert.equal(resumed.cause?.reason, "resume");
});

Deno.test("detectCause() leaves objects no handler's filters match without any state (stealth)", () => {
  const labelled = [changingHandler("h", "create", undefined, { labels: { app: "x" } })];
  const cycle = cycleOf(objectOf(), false);
  assert.deepEqual(detectCause(depsWith(labelled), cycle), { delay: undefined });
  assert.equal(cycle.cause, undefined, "no cause detected");
  assert.equal(cycle.memory.handledOnce, false);
  const matching = cycleOf(objectOf({ metadata: { labels: { app: "x" } } }), false);
  assert.equal(detectCause(depsWith(labelled), matching), undefined);
  assert.equal(matching.cause?.reason, "create");
});
