import assert from "node:assert/strict";
import {
  backendTest,
  selectedBackends,
  stopBackends,
  testBackend,
  withBackend,
} from "./backend.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test("selectedBackends(): names in order, both by default, one clear error for a typo", () => {
  assert.deepEqual(selectedBackends("plane,emulator"), ["emulator", "plane"]);
  assert.deepEqual(selectedBackends(" emulator "), ["emulator"]);
  assert.deepEqual(selectedBackends(""), ["emulator", "plane"]);
  assert.deepEqual(selectedBackends("", ["plane"]), ["plane"]);
  assert.throws(
    () => selectedBackends("emulator,real"),
    /^Error: KOPF_TS_TEST_BACKEND: unknown backend 'real'; use emulator, plane or both$/,
  );
});

Deno.test("withBackend('emulator'): one shared emulator, namespaces of its own", opts, async () => {
  const names = await withBackend("emulator", async (backend) => {
    assert.equal(backend.name, "emulator");
    const namespace = await backend.createNamespace("backend-fixture");
    const client = Deno.createHttpClient({ caCerts: [backend.caPem] });
    try {
      const response = await fetch(`${backend.server}/api/v1/namespaces/${namespace}`, {
        client,
        headers: { authorization: `Bearer ${backend.adminToken}` },
      });
      assert.equal(response.status, 200);
      assert.equal((await response.json()).metadata.name, namespace);
    } finally {
      client.close();
    }
    return [namespace, (await testBackend("emulator")).server === backend.server];
  });
  assert.equal(names[1], true, "the same emulator for the whole process");
});

// Registered on the emulator only: this unit test file needs no control plane.
backendTest("backendTest(): the body gets the backend it is named after", async (backend) => {
  assert.equal(backend.name, "emulator");
  await backend.compact();
}, { backends: ["emulator"] });

Deno.test("stop the test backends", opts, stopBackends);
