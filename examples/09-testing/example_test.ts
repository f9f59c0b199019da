/**
 * Testing an operator the way its authors would: run it in-process with `KopfRunner`, drive the
 * cluster with a client, and assert on what users see — status, logs, and a clean exit.
 */
import assert from "node:assert/strict";
import { parse } from "yaml";
import { KubeClient, loadKubeconfig } from "../../mod.ts";
import { createTestNamespace, KopfRunner, sharedControlPlane } from "../../testing/mod.ts";
import { Emulator } from "../../kits/emulator/mod.ts";

const KEX = { group: "kopf.dev", version: "v1", plural: "kopfexamples", namespaced: true };
const CRDS = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  namespaced: false,
};
const plane = await sharedControlPlane();

async function connect(kubeconfig: string): Promise<KubeClient> {
  const client = new KubeClient(await loadKubeconfig({ paths: [kubeconfig] }));
  const crd = parse(await Deno.readTextFile(new URL("../../crds/example.yaml", import.meta.url)));
  await client.api.create(CRDS, crd).catch(() => {}); // already there
  for (let i = 0; i < 100; i++) {
    const live = await client.api.get(CRDS, "kopfexamples.kopf.dev");
    const conditions =
      (live.status as { conditions?: Array<{ type: string; status: string }> })?.conditions ?? [];
    if (conditions.some((c) => c.type === "Established" && c.status === "True")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return client;
}

Deno.test({
  name:
    "09-testing: the operator handles create, update and delete (KopfRunner, real control plane)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    using client = await connect(plane.kubeconfigPath);
    const namespace = await createTestNamespace(plane, "ex09");
    const handlers = new URL("./example.ts", import.meta.url).pathname;
    await using runner = KopfRunner.start(["run", "--verbose", "-n", namespace, handlers], {
      kubeconfig: plane.kubeconfigPath,
    });
    await runner.ready;
    const body = {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "kopf-example-1" },
      spec: { field: "a" },
    };
    await client.api.create(KEX, body, { namespace });
    await runner.waitFor(/Object created with spec: \{"field":"a"\}/);
    await client.api.patch(KEX, "kopf-example-1", { spec: { field: "b" } }, { namespace });
    await runner.waitFor(/Object updated: \[\["change",\["spec","field"\],"a","b"\]\]/);
    await client.api.delete(KEX, "kopf-example-1", { namespace });
    await runner.waitFor(/Object deleted, cleaning up\./);
    await runner.stop();
    assert.equal(runner.exitCode, 0);
    assert.equal(runner.error, undefined);
    const live = await client.api.get(KEX, "kopf-example-1", { namespace }).catch((e) => e);
    assert.equal(live.code, 404, "the finalizer was released and the object is gone");
  },
});

Deno.test({
  name: "09-testing: the same test on the in-memory emulator (no cluster at all)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using emulator = await Emulator.start();
    using client = await connect(emulator.kubeconfigPath);
    const handlers = new URL("./example.ts", import.meta.url).pathname;
    await using runner = KopfRunner.start(["run", "--verbose", "-n", "default", handlers], {
      kubeconfig: emulator.kubeconfigPath,
    });
    await runner.ready;
    const body = {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "kopf-example-1" },
      spec: { field: "a" },
    };
    await client.api.create(KEX, body, { namespace: "default" });
    await runner.waitFor(/Object created with spec: \{"field":"a"\}/);
    await client.api.patch(KEX, "kopf-example-1", { spec: { field: "b" } }, {
      namespace: "default",
    });
    await runner.waitFor(/Object updated: \[\["change",\["spec","field"\],"a","b"\]\]/);
    await client.api.delete(KEX, "kopf-example-1", { namespace: "default" });
    await runner.waitFor(/Object deleted, cleaning up\./);
    await runner.stop();
    assert.equal(runner.exitCode, 0);
    // The emulator's history shows what the operator did: e.g. exactly one write for creation.
    const patches = emulator.history.requests.filter((r) =>
      r.verb === "patch" && r.resource === "kopfexamples"
    );
    assert.ok(patches.length >= 3, "finalizer, creation, update/deletion bookkeeping");
  },
});
