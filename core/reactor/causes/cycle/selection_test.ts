// Unit tests of the handler-selection phase: filters, progress, superseded causes, lifecycle.
import assert from "node:assert/strict";
import { allAtOnce, asap } from "../../../actions/lifecycles.ts";
import { ProgressState } from "../../../actions/progression.ts";
import type { ChangingHandler } from "../../../intents/handlers.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { Patch } from "../../../structs/patches.ts";
import { changingHandler, cycleFixture, memoryOf, objectOf } from "./_test_support.ts";
import { detectCause } from "./causation.ts";
import { openCycle } from "./opening.ts";
import { selectHandlers } from "./selection.ts";
import type { CycleState } from "./state.ts";

function selected(
  changing: ChangingHandler[],
  body: KubeObject,
  lifecycle = allAtOnce,
): { cycle: CycleState; end: unknown; logs: string[] } {
  const { deps, messages } = cycleFixture({ changing, lifecycle });
  const cycle = openCycle(deps, memoryOf(), { type: "ADDED", body }, new Patch());
  assert.equal(detectCause(deps, cycle), undefined);
  const end = selectHandlers(deps, cycle);
  return { cycle, end, logs: messages("info") };
}

const ids = (cycle: CycleState) => cycle.handling?.chosen.map((h) => h.id);

Deno.test("selectHandlers() chooses the handlers of the cause whose filters match", () => {
  const when = ({ reason }: { reason: string }) => reason === "create";
  const changing = [
    changingHandler("on-create", "create"),
    changingHandler("on-update", "update"),
    changingHandler("labelled", "create", undefined, { labels: { app: "a" } }),
    changingHandler("other-label", "create", undefined, { labels: { app: "b" } }),
    changingHandler("when-create", "create", undefined, { when: when as never }),
    changingHandler("absent-field", "create", undefined, { field: ["spec", "none"] }),
  ];
  const { cycle, end } = selected(changing, objectOf({ metadata: { labels: { app: "a" } } }));
  assert.equal(end, undefined);
  assert.equal(cycle.handling?.reason, "create");
  assert.deepEqual(ids(cycle), ["on-create", "labelled", "when-create"]);
  assert.deepEqual(cycle.handling?.ids, ["on-create", "labelled", "when-create"]);
});

Deno.test("selectHandlers() lets the lifecycle choose among the due ones", () => {
  const changing = [changingHandler("a", "create"), changingHandler("b", "create")];
  const { cycle } = selected(changing, objectOf(), asap);
  assert.deepEqual(ids(cycle), ["a"]);
  assert.deepEqual(cycle.handling?.ids, ["a", "b"]);
});

Deno.test("selectHandlers() completes a cause no handler matches at once", () => {
  const changing = [changingHandler("on-update", "update")];
  const { cycle, end } = selected(changing, objectOf());
  assert.deepEqual(end, { delay: undefined });
  assert.equal(cycle.handling, undefined);
  assert.equal(cycle.memory.handledOnce, true);
  assert.ok(!cycle.patch.isEmpty, "the diff-base is stored");
});

Deno.test("selectHandlers() skips finished and delayed handlers and purges superseded records", () => {
  const { deps } = cycleFixture();
  const now = deps.now!();
  const changing = [
    changingHandler("done", "create"),
    changingHandler("later", "create"),
    changingHandler("due", "create"),
    changingHandler("was-update", "update"),
  ];
  // Records as earlier cycles left them: one finished, one delayed, one of another cause.
  const earlier = ProgressState.load(deps.settings.persistence.progressStorage, {}, [], now);
  earlier.record("done", { kind: "success", result: undefined }, now);
  earlier.begin("later", "create", now);
  earlier.record("later", { kind: "temporary", error: new Error("again"), delay: 60 }, now);
  earlier.begin("was-update", "update", now);
  const patch = new Patch();
  earlier.store(deps.settings.persistence.progressStorage, objectOf(), patch);
  const body = { ...objectOf(), ...patch.body } as KubeObject;
  const { cycle, logs } = selected(changing, body);
  assert.deepEqual(ids(cycle), ["due"]);
  assert.equal(cycle.handling?.progress.get("was-update"), undefined, "purged");
  assert.ok(logs.some((m) => m === "Updating is superseded by create: was-update"), `${logs}`);
});
