import assert from "node:assert/strict";
import { Patch } from "../structs/patches.ts";
import {
  AnnotationsProgressStorage,
  MultiProgressStorage,
  type ProgressRecord,
  ProgressStorage,
  SmartProgressStorage,
  StatusProgressStorage,
} from "./progress.ts";
// Produced by real Python Kopf (kopf==1.45.2) with tests/compat/kopf_formats.py: the same
// storage calls on the same inputs, the resulting patches/records dumped as JSON.
import KOPF from "../../tests/compat/kopf_formats.json" with { type: "json" };

const { RECORD_FULL, RECORD_DONE, RS_BODY, BODY_WITH_PROGRESS, ESSENCE_WITH_PROGRESS } =
  KOPF.inputs;
const EXPECTED = KOPF.progress;
const LONG = "a".repeat(70);

function patchOf(fn: (patch: Patch) => void): unknown {
  const patch = new Patch();
  fn(patch);
  return patch.toJSON();
}

Deno.test("AnnotationsProgressStorage.store() writes Kopf's exact annotations", () => {
  const ann = new AnnotationsProgressStorage();
  const store = (storage: ProgressStorage, key: string, record: ProgressRecord, body = {}) =>
    patchOf((patch) => storage.store({ key, record, body, patch }));
  assert.deepEqual(store(ann, "create_fn", RECORD_FULL), EXPECTED.annotations_store_full);
  assert.deepEqual(store(ann, "create_fn", RECORD_DONE), EXPECTED.annotations_store_done);
  assert.deepEqual(
    store(new AnnotationsProgressStorage({ verbose: true }), "create_fn", RECORD_DONE),
    EXPECTED.annotations_store_verbose,
  );
  assert.deepEqual(store(ann, LONG, RECORD_DONE), EXPECTED.annotations_store_long);
  assert.deepEqual(
    store(
      new AnnotationsProgressStorage({ prefix: "example.com", v1: false }),
      "create_fn",
      RECORD_DONE,
    ),
    EXPECTED.annotations_store_custom_prefix,
  );
  assert.deepEqual(store(ann, "create_fn", RECORD_DONE, RS_BODY), EXPECTED.annotations_store_rs);
});

Deno.test("AnnotationsProgressStorage.store() orders fields as Kopf does, whatever the input order", () => {
  const patch = new Patch();
  const record = { success: true, retries: 2, started: "t", stopped: null };
  new AnnotationsProgressStorage().store({ key: "fn", record, body: {}, patch });
  assert.equal(
    patch.annotations["kopf.zalando.org/fn"],
    '{"started":"t","retries":2,"success":true}',
  );
});

Deno.test("AnnotationsProgressStorage.fetch() reads V2 keys, then V1 keys", () => {
  const ann = new AnnotationsProgressStorage();
  for (const [key, expected] of Object.entries(EXPECTED.annotations_fetch)) {
    assert.deepEqual(ann.fetch({ key, body: BODY_WITH_PROGRESS }), expected, key);
  }
});

Deno.test("AnnotationsProgressStorage.purge() nulls stored keys and drops pending writes", () => {
  const ann = new AnnotationsProgressStorage();
  const body = BODY_WITH_PROGRESS;
  assert.deepEqual(
    patchOf((patch) => {
      ann.store({ key: "fresh_fn", record: RECORD_DONE, body, patch });
      for (const key of ["create_fn", LONG, "fresh_fn", "absent_fn"]) {
        ann.purge({ key, body, patch });
      }
    }),
    EXPECTED.annotations_purge,
  );
});

Deno.test("AnnotationsProgressStorage.touch() changes the dummy only when it differs", () => {
  const ann = new AnnotationsProgressStorage();
  const touch = (
    storage: ProgressStorage,
    value: string | null,
    body: Record<string, unknown> = BODY_WITH_PROGRESS,
  ) => patchOf((patch) => storage.touch({ body, patch, value }));
  assert.deepEqual(touch(ann, "x"), EXPECTED.annotations_touch_value);
  assert.deepEqual(touch(ann, "old-touch"), EXPECTED.annotations_touch_same);
  assert.deepEqual(touch(ann, null), EXPECTED.annotations_touch_none);
  assert.deepEqual(touch(ann, null, {}), EXPECTED.annotations_touch_none_absent);
  assert.deepEqual(
    touch(new AnnotationsProgressStorage({ prefix: "example.com", v1: false }), "x", {}),
    EXPECTED.annotations_touch_custom,
  );
});

Deno.test("AnnotationsProgressStorage.clear() drops its prefix from the essence", () => {
  const essence = structuredClone(ESSENCE_WITH_PROGRESS);
  assert.deepEqual(new AnnotationsProgressStorage().clear(essence), EXPECTED.annotations_clear);
  assert.deepEqual(essence, ESSENCE_WITH_PROGRESS);
});

Deno.test("StatusProgressStorage matches Kopf on store, fetch, purge, touch and clear", () => {
  const sts = new StatusProgressStorage();
  const body = BODY_WITH_PROGRESS;
  assert.deepEqual(
    patchOf((patch) => sts.store({ key: "create_fn", record: RECORD_DONE, body: {}, patch })),
    EXPECTED.status_store,
  );
  for (const [key, expected] of Object.entries(EXPECTED.status_fetch)) {
    assert.deepEqual(sts.fetch({ key, body }), expected, key);
  }
  assert.deepEqual(
    patchOf((patch) => {
      sts.store({ key: "fresh_fn", record: RECORD_DONE, body, patch });
      for (const key of ["create_fn", "fresh_fn", "absent_fn"]) sts.purge({ key, body, patch });
    }),
    EXPECTED.status_purge,
  );
  assert.deepEqual(
    patchOf((patch) => sts.touch({ body, patch, value: "x" })),
    EXPECTED.status_touch_value,
  );
  assert.deepEqual(
    patchOf((patch) => sts.touch({ body, patch, value: null })),
    EXPECTED.status_touch_none,
  );
  assert.deepEqual(sts.clear(structuredClone(ESSENCE_WITH_PROGRESS)), EXPECTED.status_clear);
});

Deno.test("StatusProgressStorage substitutes {name} and treats corrupted containers as absent", () => {
  const sts = new StatusProgressStorage({ name: "my-op" });
  assert.deepEqual(sts.field, ["status", "my-op", "progress"]);
  assert.deepEqual(sts.touchField, ["status", "my-op", "dummy"]);
  const corrupted = { status: { "my-op": { progress: "garbage" } } };
  assert.equal(sts.fetch({ key: "fn", body: corrupted }), null);
  const custom = new StatusProgressStorage({ field: ["status", "x.y"] });
  assert.deepEqual(custom.field, ["status", "x.y"]);
});

Deno.test("SmartProgressStorage reads both, writes annotations only, purges both (as Kopf)", () => {
  const smart = new SmartProgressStorage();
  const body = BODY_WITH_PROGRESS;
  assert.deepEqual(
    patchOf((patch) => smart.store({ key: "create_fn", record: RECORD_DONE, body, patch })),
    EXPECTED.smart_store,
  );
  for (const [key, expected] of Object.entries(EXPECTED.smart_fetch)) {
    assert.deepEqual(smart.fetch({ key, body }), expected, key);
  }
  assert.deepEqual(
    patchOf((patch) => {
      smart.purge({ key: "create_fn", body, patch });
      smart.purge({ key: "status_only_fn", body, patch });
    }),
    EXPECTED.smart_purge,
  );
  assert.deepEqual(
    patchOf((patch) => smart.touch({ body, patch, value: "x" })),
    EXPECTED.smart_touch,
  );
  assert.deepEqual(smart.clear(structuredClone(ESSENCE_WITH_PROGRESS)), EXPECTED.smart_clear);
});

Deno.test("MultiProgressStorage reads in order and delegates everything to all", () => {
  const calls: string[] = [];
  class Recording extends ProgressStorage {
    constructor(readonly name: string, readonly record: ProgressRecord | null) {
      super();
    }
    fetch(): ProgressRecord | null {
      calls.push(`${this.name}.fetch`);
      return this.record;
    }
    store(): void {
      calls.push(`${this.name}.store`);
    }
    purge(): void {
      calls.push(`${this.name}.purge`);
    }
    touch(): void {
      calls.push(`${this.name}.touch`);
    }
    override flush(): void {
      calls.push(`${this.name}.flush`);
    }
  }
  const multi = new MultiProgressStorage([
    new Recording("a", null),
    new Recording("b", { retries: 1 }),
  ]);
  const patch = new Patch();
  assert.deepEqual(multi.fetch({ key: "k", body: {} }), { retries: 1 });
  multi.store({ key: "k", record: {}, body: {}, patch });
  multi.purge({ key: "k", body: {}, patch });
  multi.touch({ body: {}, patch, value: null });
  multi.flush();
  assert.deepEqual(calls, [
    "a.fetch",
    "b.fetch",
    "a.store",
    "b.store",
    "a.purge",
    "b.purge",
    "a.touch",
    "b.touch",
    "a.flush",
    "b.flush",
  ]);
  assert.deepEqual(multi.clear({ spec: {} }), { spec: {} });
});

Deno.test("a record stored by us is fetched back by us", () => {
  const smart = new SmartProgressStorage();
  const patch = new Patch();
  const record = {
    started: "2020-02-14T16:58:25.396000+00:00",
    retries: 1,
    message: "ünï ✓",
    subrefs: ["a"],
  };
  smart.store({ key: "fn/sub", record, body: {}, patch });
  const body = { metadata: { annotations: patch.annotations } };
  assert.deepEqual(smart.fetch({ key: "fn/sub", body }), record);
});
