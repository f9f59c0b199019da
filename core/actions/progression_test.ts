import assert from "node:assert/strict";
import {
  AnnotationsProgressStorage,
  type ProgressRecord,
  SmartProgressStorage,
} from "../settings/progress.ts";
import type { KubeObject } from "../structs/objects.ts";
import { Patch } from "../structs/patches.ts";
import { PermanentError, TemporaryError } from "./execution.ts";
import { ProgressState } from "./progression.ts";

const T0 = new Date("2024-01-01T00:00:00Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TS0 = "2024-01-01T00:00:00.000000+00:00";
const ts = (seconds: number) => `${at(seconds).toISOString().slice(0, 23)}000+00:00`;
const KEY = (id: string) => `kopf.zalando.org/${id}`;

/** A body with Kopf-format progress annotations (compact JSON, nulls omitted). */
function bodyWith(
  records: Record<string, Record<string, unknown>>,
  status?: Record<string, unknown>,
): KubeObject {
  const annotations: Record<string, string> = { unrelated: "x" };
  for (const [id, record] of Object.entries(records)) {
    annotations[KEY(id.replaceAll("/", "."))] = JSON.stringify(record);
  }
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "kex1", namespace: "ns", uid: "u1", annotations },
    ...(status ? { status } : {}),
  } as KubeObject;
}

const EMPTY = bodyWith({});
const temporary = (delay: number | null, message = "later") => ({
  kind: "temporary" as const,
  error: new TemporaryError(message, { delay }),
  delay,
});
const success = (result: unknown = undefined) => ({ kind: "success" as const, result });
const permanent = (message = "never") => ({
  kind: "permanent" as const,
  error: new PermanentError(message),
});

// --- load ------------------------------------------------------------------------------------

Deno.test("ProgressState.load() reads Kopf-format annotation records (PST-10, PST-12, SUB-01)", () => {
  const body = bodyWith({
    create_fn: {
      started: TS0,
      delayed: ts(60),
      purpose: "create",
      retries: 2,
      success: false,
      failure: false,
      message: "oops",
    },
    done_fn: { started: TS0, stopped: ts(5), purpose: "create", retries: 1, success: true },
    failed_fn: { started: TS0, stopped: ts(5), retries: 3, failure: true, message: "bad" },
  });
  const state = ProgressState.load(new SmartProgressStorage(), body, [
    "create_fn",
    "done_fn",
    "failed_fn",
    "absent_fn",
  ], at(10));
  assert.deepEqual(state.get("create_fn"), {
    started: T0,
    stopped: undefined,
    delayed: at(60),
    purpose: "create",
    retries: 2,
    success: false,
    failure: false,
    message: "oops",
    subrefs: undefined,
  });
  assert.equal(state.get("absent_fn"), undefined);
  assert.deepEqual(state.ids().sort(), ["create_fn", "done_fn", "failed_fn"]);
  assert.equal(state.isFinished("create_fn"), false);
  assert.equal(state.isFinished("done_fn"), true);
  assert.equal(state.isFinished("failed_fn"), true);
  assert.equal(state.isFinished("absent_fn"), false);
  assert.deepEqual(state.counts(["create_fn", "done_fn", "failed_fn", "absent_fn"]), {
    succeeded: 1,
    failed: 1,
  });
});

Deno.test("ProgressState.load() reads legacy status records and old timestamps (PST-15, PST-16)", () => {
  const body = bodyWith({}, {
    kopf: {
      progress: {
        legacy_fn: { started: "2024-01-01T00:00:00", retries: 1, delayed: "2024-01-01T00:01:00" },
      },
    },
  });
  const state = ProgressState.load(new SmartProgressStorage(), body, ["legacy_fn"], at(10));
  assert.equal(state.get("legacy_fn")?.started.getTime(), T0.getTime());
  assert.equal(state.get("legacy_fn")?.delayed?.getTime(), at(60).getTime());
  assert.equal(state.get("legacy_fn")?.retries, 1);
});

Deno.test("ProgressState.load() prefers the annotation over the status record (PST-15, SUB-01)", () => {
  const body = bodyWith(
    { fn: { started: TS0, retries: 5 } },
    { kopf: { progress: { fn: { started: TS0, retries: 1 } } } },
  );
  const state = ProgressState.load(new SmartProgressStorage(), body, ["fn"], T0);
  assert.equal(state.get("fn")?.retries, 5);
});

Deno.test("ProgressState.load() uses `now` for records without a start time (PST-10)", () => {
  const body = bodyWith({ fn: { retries: 1 } });
  const state = ProgressState.load(new SmartProgressStorage(), body, ["fn"], at(42));
  assert.equal(state.get("fn")?.started.getTime(), at(42).getTime());
  assert.equal(state.get("fn")?.retries, 1);
});

// --- begin / record ----------------------------------------------------------------------------

Deno.test("ProgressState.begin() starts a new record once and keeps an existing one (SUB-02)", () => {
  const body = bodyWith({ old_fn: { started: TS0, purpose: "update", retries: 1 } });
  const state = ProgressState.load(new SmartProgressStorage(), body, ["old_fn", "new_fn"], T0);
  const begun = state.begin("new_fn", "create", at(5));
  assert.deepEqual(begun, {
    started: at(5),
    retries: 0,
    success: false,
    failure: false,
    purpose: "create",
  });
  assert.equal(state.begin("new_fn", "create", at(9)), begun);
  const existing = state.begin("old_fn", "create", at(5));
  assert.equal(existing.started.getTime(), T0.getTime());
  assert.equal(existing.purpose, "update");
  assert.equal(existing.retries, 1);
});

Deno.test("ProgressState.record() counts every attempt and delays temporary failures (SUB-02, ERR-02)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["fn"], T0);
  state.begin("fn", "create", T0);
  state.record("fn", temporary(30, "first"), at(1));
  assert.equal(state.get("fn")?.retries, 1);
  assert.equal(state.get("fn")?.delayed?.getTime(), at(31).getTime());
  assert.equal(state.get("fn")?.message, "first");
  assert.equal(state.get("fn")?.stopped, undefined);
  assert.equal(state.isFinished("fn"), false);
  assert.equal(state.isDelayed("fn", at(30)), true);
  assert.equal(state.isDelayed("fn", at(31)), false);
  assert.equal(state.isDelayed("fn", at(32)), false);

  state.record("fn", temporary(null, "second"), at(40));
  assert.equal(state.get("fn")?.retries, 2);
  assert.equal(state.get("fn")?.delayed?.getTime(), at(40).getTime());
  assert.equal(state.isDelayed("fn", at(40)), false);
  assert.equal(state.get("fn")?.message, "second");
  assert.equal(state.get("fn")?.started.getTime(), T0.getTime());
});

Deno.test("ProgressState.record() finishes on success, clearing the delay (SUB-02)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["fn"], T0);
  state.begin("fn", "create", T0);
  state.record("fn", temporary(30), at(1));
  state.record("fn", success({ a: 1 }), at(31));
  const s = state.get("fn")!;
  assert.equal(s.retries, 2);
  assert.equal(s.success, true);
  assert.equal(s.failure, false);
  assert.equal(s.stopped?.getTime(), at(31).getTime());
  assert.equal(s.delayed, undefined);
  assert.equal(state.isFinished("fn"), true);
  assert.equal(state.isDelayed("fn", at(2)), false);
});

Deno.test("ProgressState.record() finishes on permanent failure with its message (SUB-02, ERR-03)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["fn"], T0);
  state.begin("fn", "create", T0);
  state.record("fn", permanent("bad input"), at(2));
  const s = state.get("fn")!;
  assert.equal(s.retries, 1);
  assert.equal(s.failure, true);
  assert.equal(s.success, false);
  assert.equal(s.stopped?.getTime(), at(2).getTime());
  assert.equal(s.message, "bad input");
  assert.equal(state.isFinished("fn"), true);
  assert.deepEqual(state.counts(["fn"]), { succeeded: 0, failed: 1 });
});

Deno.test("ProgressState.record() counts an ignored error as finished successfully (ERR-05)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["fn"], T0);
  state.record("fn", { kind: "ignored", error: new Error("meh") }, at(1));
  assert.equal(state.get("fn")?.success, true);
  assert.equal(state.isFinished("fn"), true);
  assert.deepEqual(state.counts(["fn"]), { succeeded: 1, failed: 0 });
});

Deno.test("ProgressState.record() accumulates sub-handler refs without duplicates (HK-SUB-06, PST-10)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["parent"], T0);
  state.begin("parent", "create", T0);
  state.record("parent", temporary(0), at(1), ["parent/b", "parent/a"]);
  state.record("parent", success(), at(2), ["parent/a", "parent/c"]);
  assert.deepEqual([...state.get("parent")!.subrefs!].sort(), ["parent/a", "parent/b", "parent/c"]);
});

// --- nextDelay / allFinished / counts ----------------------------------------------------------

Deno.test("ProgressState.nextDelay() is the earliest pending delay, 0 if due (SUB-05)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["a", "b", "c"], T0);
  assert.equal(state.nextDelay([], T0), undefined);
  state.begin("a", "create", T0);
  state.record("a", temporary(30), T0);
  state.begin("b", "create", T0);
  state.record("b", temporary(10), T0);
  assert.equal(state.nextDelay(["a", "b"], T0), 10);
  assert.equal(state.nextDelay(["a", "b"], at(4)), 6);
  assert.equal(state.nextDelay(["a", "b"], at(15)), 0);
  assert.equal(state.nextDelay(["a"], at(4)), 26);
  // A handler not started yet is due now.
  assert.equal(state.nextDelay(["a", "c"], at(4)), 0);
  // Finished handlers do not count.
  state.record("b", success(), at(10));
  state.record("c", permanent(), at(10));
  assert.equal(state.nextDelay(["b", "c"], at(10)), undefined);
  assert.equal(state.nextDelay(["a", "b", "c"], at(10)), 20);
});

Deno.test("ProgressState.allFinished() and counts() consider only the given handlers (SUB-03)", () => {
  const state = ProgressState.load(new SmartProgressStorage(), EMPTY, ["a", "b", "c"], T0);
  assert.equal(state.allFinished([]), true);
  assert.equal(state.allFinished(["a"]), false);
  state.record("a", success(), T0);
  state.record("b", permanent(), T0);
  state.record("c", temporary(1), T0);
  assert.equal(state.allFinished(["a", "b"]), true);
  assert.equal(state.allFinished(["a", "b", "c"]), false);
  assert.deepEqual(state.counts(["a", "b", "c"]), { succeeded: 1, failed: 1 });
  assert.deepEqual(state.counts(["a"]), { succeeded: 1, failed: 0 });
});

// --- store / purge: exact patches ---------------------------------------------------------------

Deno.test("ProgressState.store() writes a new record as compact Kopf JSON, nulls omitted (SUB-01, PST-12)", () => {
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, EMPTY, ["create_fn"], T0);
  state.begin("create_fn", "create", T0);
  state.record("create_fn", temporary(30, "wait"), at(1));
  const patch = new Patch();
  state.store(storage, EMPTY, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: {
      annotations: {
        [KEY("create_fn")]: `{"started":"${TS0}","delayed":"${
          ts(31)
        }","purpose":"create","retries":1,"success":false,"failure":false,"message":"wait"}`,
      },
    },
  });
});

Deno.test("ProgressState.store() writes a finished record with sorted subrefs (SUB-02, PST-10)", () => {
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, EMPTY, ["parent"], T0);
  state.begin("parent", "update", T0);
  state.record("parent", success(), at(2), ["parent/z", "parent/a"]);
  const patch = new Patch();
  state.store(storage, EMPTY, patch);
  const written = JSON.parse(patch.annotations[KEY("parent")]!) as ProgressRecord;
  assert.deepEqual(written, {
    started: TS0,
    stopped: ts(2),
    purpose: "update",
    retries: 1,
    success: true,
    failure: false,
    subrefs: ["parent/a", "parent/z"],
  });
  assert.deepEqual(Object.keys(written), [
    "started",
    "stopped",
    "purpose",
    "retries",
    "success",
    "failure",
    "subrefs",
  ]);
});

Deno.test("ProgressState.store() writes only the records that changed (SUB-02)", () => {
  const body = bodyWith({
    a: { started: TS0, purpose: "create", retries: 1, success: true, failure: false },
    b: { started: TS0, delayed: ts(1), purpose: "create", retries: 1, message: "x" },
  });
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, body, ["a", "b"], at(5));
  state.begin("a", "create", at(5));
  state.begin("b", "create", at(5));
  let patch = new Patch();
  state.store(storage, body, patch);
  assert.equal(patch.isEmpty, true, "nothing changed yet");

  state.record("b", success(), at(5));
  patch = new Patch();
  state.store(storage, body, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: {
      annotations: {
        [KEY("b")]: `{"started":"${TS0}","stopped":"${
          ts(5)
        }","purpose":"create","retries":2,"success":true,"failure":false}`,
      },
    },
  });

  patch = new Patch();
  state.store(storage, body, patch);
  assert.equal(patch.isEmpty, true, "stored changes are not written again");
});

Deno.test("ProgressState.purge() nulls existing records in annotations and status (SUB-03, PST-22)", () => {
  const body = bodyWith(
    { fn: { started: TS0, retries: 1, success: true } },
    { kopf: { progress: { fn: { started: TS0, retries: 1 } } } },
  );
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, body, ["fn"], T0);
  state.purge("fn");
  assert.equal(state.get("fn"), undefined);
  assert.equal(state.isFinished("fn"), false);
  const patch = new Patch();
  state.store(storage, body, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: { annotations: { [KEY("fn")]: null } },
    status: { kopf: { progress: { fn: null } } },
  });
});

Deno.test("ProgressState.purge() also purges the sub-handlers' records that exist (SUB-03, HK-SUB-06)", () => {
  const body = bodyWith({
    parent: {
      started: TS0,
      retries: 2,
      success: true,
      subrefs: ["parent/sub1", "parent/sub2"],
    },
    "parent/sub1": { started: TS0, retries: 1, success: true },
  });
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, body, ["parent"], T0);
  state.purge("parent");
  const patch = new Patch();
  state.store(storage, body, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: {
      annotations: { [KEY("parent")]: null, [KEY("parent.sub1")]: null },
    },
  });
});

Deno.test("ProgressState.purge() of records that never reached the object writes nothing (SUB-03)", () => {
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, EMPTY, ["fn"], T0);
  state.begin("fn", "create", T0);
  state.record("fn", success(), T0, ["fn/sub"]);
  state.purge("fn");
  const patch = new Patch();
  state.store(storage, EMPTY, patch);
  assert.equal(patch.isEmpty, true);
  assert.deepEqual(patch.toJSON(), {});
});

Deno.test("ProgressState purge then begin replaces a superseded record (SUB-04)", () => {
  const body = bodyWith({
    fn: { started: TS0, delayed: ts(60), purpose: "create", retries: 3, message: "old" },
  });
  const storage = new SmartProgressStorage();
  const state = ProgressState.load(storage, body, ["fn"], at(10));
  assert.equal(state.get("fn")?.purpose, "create");
  state.purge("fn");
  state.begin("fn", "delete", at(10));
  const patch = new Patch();
  state.store(storage, body, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: {
      annotations: {
        [KEY("fn")]: `{"started":"${
          ts(10)
        }","purpose":"delete","retries":0,"success":false,"failure":false}`,
      },
    },
  });
});

Deno.test("ProgressState.store() with a custom prefix adds the kopf-managed marker (PST-21, SUB-75)", () => {
  const storage = new AnnotationsProgressStorage({ prefix: "my-op.example.com" });
  const state = ProgressState.load(storage, EMPTY, ["fn"], T0);
  state.begin("fn", "create", T0);
  const patch = new Patch();
  state.store(storage, EMPTY, patch);
  assert.deepEqual(patch.toJSON(), {
    metadata: {
      annotations: {
        "my-op.example.com/fn":
          `{"started":"${TS0}","purpose":"create","retries":0,"success":false,"failure":false}`,
        "my-op.example.com/kopf-managed": "yes",
      },
    },
  });
});

Deno.test("ProgressState fetches records lazily for handlers not listed at load (HK-SUB-07)", () => {
  const body = bodyWith({ "parent/child": { started: TS0, retries: 1, success: true } });
  const state = ProgressState.load(new SmartProgressStorage(), body, ["parent"], T0);
  assert.deepEqual(state.ids(), []);
  assert.equal(state.isFinished("parent/child"), true);
  assert.deepEqual(state.ids(), ["parent/child"]);
});
