/**
 * A handler's client talks to its operator's cluster: `ctx.client` and `KubeClient.connect()`
 * inside a handler reach the cluster the operator watches — chosen by `--context`, or
 * `--embedded` — not whatever the kubeconfig's current context says.
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import { KubeClient } from "../core/client/client.ts";
import { ApiError } from "../core/client/errors.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { spawnDeno, spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const MOD = new URL("../mod.ts", import.meta.url).href;

/** A handler that makes one child with `ctx.client` and one with `KubeClient.connect()`. */
const HANDLERS = `
import { KubeClient, on } from "${MOD}";
const CONFIGMAPS = { group: "", version: "v1", plural: "configmaps", namespaced: true };
on.create("kopfexamples", async function create_fn({ client, name, namespace }) {
  const child = (suffix: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: name + "-" + suffix },
    data: { by: suffix },
  });
  await client.api.create(CONFIGMAPS, child("ctx"), { namespace });
  using connected = await KubeClient.connect();
  await connected.api.create(CONFIGMAPS, child("connect"), { namespace });
  return { children: 2 };
});
`;

async function exists(client: KubeClient, name: string, namespace: string): Promise<boolean> {
  try {
    await client.api.get(CONFIGMAPS, name, { namespace });
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return false;
    throw error;
  }
}

Deno.test(
  "handler client: with --context, ctx.client and KubeClient.connect() create children in the watched cluster, not the current context's",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    await using emulator = await Emulator.start();
    await using dir = await tempDir("kopf-handler-client-");
    // One kubeconfig, two API servers: the current context is the emulator (not watched).
    const kubeconfig = `${dir.path}/kubeconfig`;
    await Deno.writeTextFile(
      kubeconfig,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: "plane",
            cluster: { server: plane.server, "certificate-authority-data": btoa(plane.caPem) },
          },
          {
            name: "emulator",
            cluster: {
              server: emulator.server,
              "certificate-authority-data": btoa(emulator.caPem),
            },
          },
        ],
        users: [
          { name: "plane", user: { token: plane.adminToken } },
          { name: "emulator", user: { token: emulator.token } },
        ],
        contexts: [
          { name: "plane", context: { cluster: "plane", user: "plane" } },
          { name: "emulator", context: { cluster: "emulator", user: "emulator" } },
        ],
        "current-context": "emulator",
      }),
      { mode: 0o600 },
    );
    const handlers = `${dir.path}/handlers.ts`;
    await Deno.writeTextFile(handlers, HANDLERS);

    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("hclient");
    // The same namespace and CRD on the other side, so that a misdirected child would land.
    using other = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    await emulator.applyYaml(await Deno.readTextFile("crds/example.yaml"));
    await other.api.create({ group: "", version: "v1", plural: "namespaces", namespaced: false }, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace },
    });

    await using op = await spawnOperator(
      [handlers, "--standalone", "-n", namespace, "--context", "plane", "--verbose"],
      { KUBECONFIG: kubeconfig },
    );
    await op.waitForLine(/Watching kopfexamples/);
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "parent" },
      spec: {},
    }, { namespace });
    await op.waitForLine(/Handler 'create_fn' (succeeded|failed)/);
    await eventually(
      async () =>
        (await exists(client, "parent-ctx", namespace)) &&
        (await exists(client, "parent-connect", namespace)),
      30_000,
      `both children in the watched cluster; output:\n${op.lines.join("\n")}`,
    );
    assert.equal(await exists(other, "parent-ctx", namespace), false, "ctx.client: elsewhere");
    assert.equal(await exists(other, "parent-connect", namespace), false, "connect(): elsewhere");
    assert.equal(await op.stop(), 0);
  },
);

Deno.test(
  "handler client: with --embedded, a handler creates its children in the embedded API",
  opts,
  async () => {
    await using dir = await tempDir("kopf-handler-client-");
    const handlers = `${dir.path}/handlers.ts`;
    await Deno.writeTextFile(handlers, HANDLERS);
    // No cluster besides the embedded one: nothing must depend on the environment's.
    await using op = await spawnDeno(
      ["cli.ts", "run", handlers, "--embedded", "--standalone", "--verbose"],
      { KUBECONFIG: "/nonexistent/kubeconfig" },
    );
    const line = await op.waitForLine(/export KUBECONFIG=/);
    using client = await KubeClient.connect({
      kubeconfig: line.split("export KUBECONFIG=")[1]!.trim(),
    });
    await op.waitForLine(/Watching kopfexamples/);
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "parent" },
      spec: {},
    }, { namespace: "default" });
    const status = await eventually(
      async () => (await client.api.get(KOPFEXAMPLES, "parent", { namespace: "default" })).status,
      30_000,
      "the handler's result",
    );
    assert.deepEqual(status, { create_fn: { children: 2 } }, op.lines.join("\n"));
    assert.ok(await exists(client, "parent-ctx", "default"));
    assert.ok(await exists(client, "parent-connect", "default"));
    assert.equal(await op.stop(), 0);
  },
);
