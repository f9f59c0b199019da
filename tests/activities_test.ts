/**
 * Operator activities against the real control plane: startup before any API request, cleanup
 * on exit, login handlers feeding (and renewing) credentials, probes on the liveness endpoint.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { ConnectionInfo } from "../core/client/connection.ts";
import { connectionInfo } from "../core/client/connection_fields.ts";
import { PermanentError } from "../core/actions/execution.ts";
import { ActivityError } from "../core/engines/runners/activities.ts";
import { LoginError } from "../core/client/vault.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { operator } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { CONFIGMAPS, eventually, kubeconfigPath, tempDir, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/**
 * Runs an operator with only the registry's handlers (login handlers give the connection) until
 * it is ready, then stops it.
 * @returns Its log messages.
 */
async function runUntilReady(registry: OperatorRegistry, namespace: string): Promise<string[]> {
  const controller = new AbortController();
  let ready = false;
  const logs: string[] = [];
  const running = operator({
    registry,
    namespaces: [namespace],
    standalone: true,
    settings: createSettings(),
    signal: controller.signal,
    onReady: () => (ready = true),
    listeners: [(entry) => logs.push(entry.message)],
  });
  await eventually(() => ready, 15_000, "the operator to be ready");
  controller.abort();
  await running; // no failure
  return logs;
}

Deno.test(
  "startup runs before any API request; a permanent failure stops the operator (HK-ACT-01)",
  opts,
  async () => {
    using client = new KubeClient(await loadKubeconfig({ paths: [await kubeconfigPath()] }));
    const registry = new OperatorRegistry();
    let cleaned = false;
    on.startup({ registry }, function broken() {
      throw new PermanentError("cannot start");
    });
    on.cleanup({ registry }, function tidy() {
      cleaned = true;
    });
    const error = await operator({ registry, client, standalone: true }).catch((e) => e);
    assert.ok(error instanceof ActivityError);
    assert.match(error.message, /startup activity failed: 'broken': cannot start/);
    assert.equal(client.counters.count(), 0, "nothing talked to the cluster");
    assert.ok(cleaned, "cleanup ran on the failure path too");
  },
);

Deno.test(
  "startup may change settings and fill the memo; objects get a copy of the memo (CFG-01, SUB-73)",
  opts,
  async () => {
    const namespace = await testNamespace("startup");
    const seen: unknown[] = [];
    await using op = await startOperator((registry) => {
      on.startup({ registry }, function prepare({ settings, memo }) {
        settings.persistence.finalizer = "example.com/custom-finalizer";
        memo.greeting = "hi";
      });
      on.event("configmaps", { registry }, function spy({ memo }) {
        seen.push(memo.greeting);
        memo.greeting = "changed per object";
      });
    }, { namespaces: [namespace], memo: {} });
    await op.ready;
    await op.client.api.create(
      { group: "", version: "v1", plural: "configmaps", namespaced: true },
      {
        metadata: { name: "a" },
      },
      { namespace },
    );
    await op.client.api.create(
      { group: "", version: "v1", plural: "configmaps", namespaced: true },
      {
        metadata: { name: "b" },
      },
      { namespace },
    );
    await eventually(
      () => seen.filter((x) => x === "hi").length >= 2,
      15_000,
      "both objects see the operator memo",
    );
  },
);

Deno.test(
  "login handlers provide credentials and are re-run on 401 (HK-ACT-05, SUB-71)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const good = await loadKubeconfig({ paths: [plane.kubeconfigPath] });
    const namespace = await testNamespace("login");
    let calls = 0;
    const registry = new OperatorRegistry();
    on.login({ registry }, function credentials(): ConnectionInfo {
      calls++;
      const token = calls === 1 ? "expired" : plane.adminToken;
      return {
        server: good.server,
        caPem: good.caPem,
        source: "test login handler",
        credentials: {
          headers: () => Promise.resolve({ Authorization: `Bearer ${token}` }),
          invalidate: () => Promise.resolve(false),
        },
      } as ConnectionInfo;
    });
    const logs = await runUntilReady(registry, namespace);
    assert.equal(calls, 2, "the rejected credential caused one re-login");
    // AUTH-12: the lines Kopf logs around the logins, in order.
    const auth = logs.filter((m) => /authentication|Activity 'credentials'/i.test(m));
    assert.deepEqual(auth.filter((m) => /authentication/.test(m)), [
      "Initial authentication has been initiated.",
      "Initial authentication has finished.",
      "Re-authentication has been initiated.",
      "Re-authentication has finished.",
    ]);
  },
);

Deno.test(
  "expired login credentials are renewed before the next request; a naive expiration is UTC (AUTH-04)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const good = await loadKubeconfig({ paths: [plane.kubeconfigPath] });
    const namespace = await testNamespace("expiry");
    const logins: number[] = [];
    let expiry = 0;
    const registry = new OperatorRegistry();
    on.login({ registry }, function credentials(): ConnectionInfo {
      logins.push(Date.now());
      // The first credentials expire in 2 s, given as a naive UTC time ("…T12:00:00", no zone).
      if (logins.length === 1) expiry = Math.ceil((Date.now() + 2_000) / 1000) * 1000;
      const naive = new Date(expiry).toISOString().replace(/\.\d+Z$/, "");
      return {
        server: good.server,
        caPem: good.caPem,
        source: "test login handler",
        credentials: {
          headers: () => Promise.resolve({ Authorization: `Bearer ${plane.adminToken}` }),
          invalidate: () => Promise.resolve(false),
        },
        ...(logins.length === 1 ? { expiration: naive } : {}),
      };
    });
    // A handler's result is written to the object: a request of the operator's own.
    on.create("configmaps", { registry }, function note() {
      return "noted";
    });
    const controller = new AbortController();
    let ready = false;
    const running = operator({
      registry,
      namespaces: [namespace],
      standalone: true,
      settings: createSettings(),
      signal: controller.signal,
      onReady: () => (ready = true),
    });
    try {
      await eventually(() => ready, 15_000, "the operator to be ready");
      assert.equal(logins.length, 1);
      // Requests after the expiration (the operator's own, for this object's events) log in first.
      using client = new KubeClient(good);
      await eventually(
        async () => {
          if (Date.now() > expiry) return true;
          await new Promise((r) => setTimeout(r, 200));
          return false;
        },
        10_000,
        "the expiration to pass",
      );
      await client.api.create(
        { group: "", version: "v1", plural: "configmaps", namespaced: true },
        {
          metadata: { name: "after-expiry" },
        },
        { namespace },
      );
      await eventually(
        async () =>
          (await client.api.get(CONFIGMAPS, "after-expiry", { namespace })).metadata?.annotations,
        15_000,
        "the handler's write",
      );
      await eventually(() => logins.length >= 2, 15_000, "a second login");
      assert.ok(logins[1]! >= expiry, "not renewed before the expiration");
    } finally {
      controller.abort();
      await running;
    }
  },
);

Deno.test("the liveness endpoint serves probe results (HK-ACT-06, PROBE)", opts, async () => {
  const namespace = await testNamespace("probe");
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await using op = await startOperator((registry) => {
    on.probe({ registry }, function now() {
      return 42;
    });
    on.event("configmaps", { registry }, () => {});
  }, { namespaces: [namespace], liveness: `http://127.0.0.1:${port}/healthz` });
  await op.ready;
  const response = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { now: 42 });
  const missing = await fetch(`http://127.0.0.1:${port}/other`);
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
});

Deno.test(
  "probe results are reused for 10 seconds: quick requests run the probe handlers once (PROBE-04)",
  opts,
  async () => {
    const namespace = await testNamespace("probe-cache");
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    listener.close();
    let runs = 0;
    await using op = await startOperator((registry) => {
      on.probe({ registry }, async function counted() {
        runs++;
        await new Promise((r) => setTimeout(r, 100));
        return runs;
      });
      on.event("configmaps", { registry }, () => {});
    }, { namespaces: [namespace], liveness: `http://127.0.0.1:${port}/healthz` });
    await op.ready;
    const url = `http://127.0.0.1:${port}/healthz`;
    // Two at once share one run; one right after reuses its result.
    const [a, b] = await Promise.all([fetch(url), fetch(url)]);
    const c = await fetch(url);
    for (const response of [a, b, c]) {
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { counted: 1 });
    }
    assert.equal(runs, 1);
  },
);

Deno.test(
  "login handlers fill a vault: a rejected higher-priority credential falls back to the next, an expired one is skipped (AUTH-06, AUTH-10, SUB-71)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const good = await loadKubeconfig({ paths: [plane.kubeconfigPath] });
    const namespace = await testNamespace("vault");
    const used: string[] = [];
    const info = (name: string, token: string, extra: Partial<ConnectionInfo>) => ({
      server: good.server,
      caPem: good.caPem,
      source: name,
      credentials: {
        headers: () => {
          used.push(name);
          return Promise.resolve({ Authorization: `Bearer ${token}` });
        },
        invalidate: () => Promise.resolve(false),
      },
      ...extra,
    });
    let logins = 0;
    const registry = new OperatorRegistry();
    on.login({ registry }, function preferred(): ConnectionInfo {
      logins++;
      return info("preferred", "rejected-token", { priority: 10 });
    });
    on.login({ registry }, function expired(): ConnectionInfo {
      return info("expired", plane.adminToken, { priority: 20, expiration: "2000-01-01T00:00:00" });
    });
    on.login({ registry }, function fallback(): ConnectionInfo {
      return info("fallback", plane.adminToken, { priority: 1 });
    });
    await runUntilReady(registry, namespace); // no failure
    assert.equal(used.includes("expired"), false, "the expired credential is never used");
    assert.equal(used[0], "preferred", "the highest valid priority first");
    assert.equal(
      used.filter((name) => name === "preferred").length,
      1,
      "rejected once, then dropped",
    );
    assert.ok(used.slice(1).every((name) => name === "fallback"), used.join(","));
    assert.equal(logins, 1, "no re-login while a credential is left");
  },
);

Deno.test(
  "an operator whose login handlers give no valid credentials fails with a LoginError (AUTH-10)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const good = await loadKubeconfig({ paths: [plane.kubeconfigPath] });
    const namespace = await testNamespace("nologin");
    let logins = 0;
    const registry = new OperatorRegistry();
    on.login({ registry }, function stale(): ConnectionInfo {
      logins++;
      return {
        server: good.server,
        caPem: good.caPem,
        source: "stale",
        credentials: {
          headers: () => Promise.resolve({ Authorization: "Bearer always-rejected" }),
          invalidate: () => Promise.resolve(false),
        },
      };
    });
    const error = await operator({
      registry,
      namespaces: [namespace],
      standalone: true,
      settings: createSettings(),
      signal: AbortSignal.timeout(30_000),
    }).then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof LoginError, String(error));
    assert.match(error.message, /No valid credentials/);
    assert.equal(logins, 2, "one re-login; the same rejected token is not retried");
  },
);

Deno.test(
  "login handlers may return Kopf's flat ConnectionInfo fields: token with caData, or a client certificate via connectionInfo() (AUTH-03)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/ca.crt`, plane.caPem);
    const forms: Record<string, () => unknown> = {
      // The plain object, as a Kopf user would write ConnectionInfo(server=…, ca_data=…, token=…).
      token: () => ({ server: plane.server, caData: btoa(plane.caPem), token: plane.adminToken }),
      certificate: () =>
        connectionInfo({
          server: plane.server,
          caPath: `${dir.path}/ca.crt`,
          certificateData: btoa(plane.adminCertPem),
          privateKeyData: plane.adminKeyPem,
        }),
    };
    for (const [form, login] of Object.entries(forms)) {
      const namespace = await testNamespace(`flat-${form}`);
      const registry = new OperatorRegistry();
      const seen: string[] = [];
      on.login({ registry }, function flat() {
        return login();
      });
      on.event("configmaps", { registry }, function spy({ name }) {
        if (name) seen.push(name);
      });
      const controller = new AbortController();
      let ready = false;
      const running = operator({
        registry,
        namespaces: [namespace],
        standalone: true,
        settings: createSettings(),
        signal: controller.signal,
        onReady: () => (ready = true),
      });
      try {
        await eventually(() => ready, 15_000, `the operator (${form}) to be ready`);
        using client = new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
        await client.api.create(CONFIGMAPS, { metadata: { name: "seen" } }, { namespace });
        await eventually(() => seen.includes("seen"), 15_000, `the operator (${form}) sees it`);
      } finally {
        controller.abort();
        await running;
      }
    }
  },
);
