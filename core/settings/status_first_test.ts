import assert from "node:assert/strict";
import { Patch } from "../structs/patches.ts";
import { AnnotationsDiffBaseStorage } from "./diffbase.ts";
import { AnnotationsProgressStorage } from "./progress.ts";
import { StatusFirstDiffBaseStorage, StatusFirstProgressStorage } from "./status_first.ts";

const LHC = "kopf.zalando.org/last-handled-configuration";
const body = {
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  metadata: { name: "x", annotations: { team: "a" } },
  spec: { size: 1 },
};

Deno.test("StatusFirstDiffBaseStorage stores only in status: a patch without metadata", () => {
  const storage = new StatusFirstDiffBaseStorage();
  const patch = new Patch();
  storage.store({ body, patch, essence: storage.build({ body }) });
  assert.deepEqual(patch.toJSON(), {
    status: {
      kopf: {
        "last-handled-configuration": '{"spec":{"size":1},"metadata":{"annotations":{"team":"a"}}}',
      },
    },
  });
});

Deno.test("StatusFirstDiffBaseStorage reads Kopf's annotation when status has none, and removes it on the next store", () => {
  const kopf = new AnnotationsDiffBaseStorage();
  const migrated = new Patch();
  kopf.store({ body, patch: migrated, essence: kopf.build({ body }) });
  const stored = {
    ...body,
    metadata: {
      ...body.metadata,
      annotations: { ...body.metadata.annotations, [LHC]: migrated.annotations[LHC] },
    },
  };
  const storage = new StatusFirstDiffBaseStorage();
  // The essence it builds equals Kopf's: the migrated object does not look changed.
  assert.deepEqual(storage.fetch({ body: stored }), storage.build({ body: stored }));
  const patch = new Patch();
  storage.store({ body: stored, patch, essence: storage.build({ body: stored }) });
  assert.equal(patch.annotations[LHC], null);
  assert.equal(
    typeof (patch.toJSON() as { status: { kopf: Record<string, unknown> } }).status.kopf[
      "last-handled-configuration"
    ],
    "string",
  );
});

Deno.test("StatusFirstDiffBaseStorage prefers status over a stale annotation", () => {
  const storage = new StatusFirstDiffBaseStorage();
  const stored = {
    ...body,
    metadata: { ...body.metadata, annotations: { [LHC]: '{"spec":{"size":0}}\n' } },
    status: { kopf: { "last-handled-configuration": '{"spec":{"size":1}}' } },
  };
  assert.deepEqual(storage.fetch({ body: stored }), { spec: { size: 1 } });
});

Deno.test("StatusFirstProgressStorage writes status, reads Kopf's annotations, purges both", () => {
  const storage = new StatusFirstProgressStorage();
  const patch = new Patch();
  storage.store({ key: "create_fn", record: { retries: 1 }, body, patch });
  assert.equal(patch.annotations["kopf.zalando.org/create_fn"], undefined);
  assert.deepEqual(
    (patch.toJSON() as { status: { kopf: { progress: Record<string, unknown> } } }).status.kopf
      .progress["create_fn"],
    { retries: 1 },
  );

  const kopf = new AnnotationsProgressStorage();
  const annotated = new Patch();
  kopf.store({ key: "create_fn", record: { retries: 2 }, body, patch: annotated });
  const stored = {
    ...body,
    metadata: { ...body.metadata, annotations: annotated.annotations as Record<string, string> },
  };
  assert.deepEqual(storage.fetch({ key: "create_fn", body: stored }), { retries: 2 });
  const purge = new Patch();
  storage.purge({ key: "create_fn", body: stored, patch: purge });
  assert.equal(purge.annotations["kopf.zalando.org/create_fn"], null);
});
