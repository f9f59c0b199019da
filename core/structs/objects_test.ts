import assert from "node:assert/strict";
import { objectFields } from "./objects.ts";

Deno.test("objectFields(): spec and status are {} when absent or not mappings; labels and annotations {} when absent", () => {
  const bare = objectFields({ metadata: { name: "a", uid: "u1" }, spec: ["not", "a", "mapping"] });
  assert.deepEqual(bare.spec, {});
  assert.deepEqual(bare.status, {});
  assert.deepEqual(bare.labels, {});
  assert.deepEqual(bare.annotations, {});
  assert.equal(bare.name, "a");
  assert.equal(bare.uid, "u1");
  assert.equal(bare.namespace, undefined);

  const body = {
    metadata: {
      name: "b",
      namespace: "ns",
      uid: "u2",
      labels: { l: "1" },
      annotations: { a: "2" },
    },
    spec: { size: 1 },
    status: { phase: "up" },
  };
  const full = objectFields(body);
  assert.equal(full.body, body);
  assert.equal(full.spec, body.spec, "the body's own spec, not a copy");
  assert.equal(full.status, body.status);
  assert.equal(full.meta, body.metadata);
  assert.equal(full.labels, body.metadata.labels);
  assert.equal(full.namespace, "ns");
});
