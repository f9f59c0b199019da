/**
 * Authentication and configuration against the real control plane: exec credential plugins
 * renewed after expiry and after 401, RBAC denials, and bad configuration giving one clear line.
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { ApiError, TransportError } from "../core/client/errors.ts";
import { createCertificateAuthority } from "../kits/certificates.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { on } from "../core/api/on.ts";
import { EVENTS_RESOURCE, postEvent } from "../core/client/events.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import {
  CONFIGMAPS,
  eventually,
  kubeconfigWith,
  NAMESPACES,
  SERVICEACCOUNTS,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A bash exec plugin: prints a bad token for the first N calls, then the good one; counts calls. */
async function writePlugin(dir: string): Promise<string> {
  const path = `${dir}/plugin.sh`;
  await Deno.writeTextFile(
    path,
    `#!/usr/bin/env bash
n=$(( $(cat "$COUNT_FILE" 2>/dev/null || echo 0) + 1 )); echo $n > "$COUNT_FILE"
token="$GOOD_TOKEN"; [ "$n" -le "\${BAD_CALLS:-0}" ] && token="expired-token"
exp=$(date -u -d "+\${EXPIRES_IN:-3600} seconds" +%Y-%m-%dT%H:%M:%SZ)
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' \\
  "$API_VERSION" "$token" "$exp"
`,
  );
  await Deno.chmod(path, 0o755);
  return path;
}

for (
  const apiVersion of ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
) {
  Deno.test(
    `exec plugin (${apiVersion.split("/")[1]}): a rejected credential is renewed by re-executing`,
    opts,
    async () => {
      const plane = await sharedControlPlane();
      await using dir = await tempDir();
      const plugin = await writePlugin(dir.path);
      const env = (extra: Record<string, string>) =>
        Object.entries({
          COUNT_FILE: `${dir.path}/count`,
          GOOD_TOKEN: plane.adminToken,
          API_VERSION: apiVersion,
          ...extra,
        })
          .map(([name, value]) => ({ name, value }));
      const exec = {
        apiVersion,
        command: plugin,
        env: env({ BAD_CALLS: "1" }),
        interactiveMode: "Never",
      };
      const path = await kubeconfigWith(dir.path, { exec });
      using client = new KubeClient(await loadKubeconfig({ paths: [path] }));
      const list = await client.api.list(CONFIGMAPS, { namespace: "default" });
      assert.ok(Array.isArray(list.items));
      assert.equal(
        await Deno.readTextFile(`${dir.path}/count`),
        "2\n",
        "first token rejected (401), plugin re-executed once",
      );
      assert.equal(client.counters.count({ code: 401 }), 1);

      // An expiring credential is renewed before use, without a 401.
      await Deno.remove(`${dir.path}/count`);
      const path2 = await kubeconfigWith(dir.path, {
        exec: { ...exec, env: env({ EXPIRES_IN: "-10" }) },
      });
      using client2 = new KubeClient(await loadKubeconfig({ paths: [path2] }));
      await client2.api.list(CONFIGMAPS, { namespace: "default" });
      await client2.api.list(CONFIGMAPS, { namespace: "default" });
      assert.equal(
        await Deno.readTextFile(`${dir.path}/count`),
        "2\n",
        "expired credential re-executed for the 2nd call",
      );
      assert.equal(client2.counters.count({ code: 401 }), 0);
    },
  );
}

Deno.test("a request forbidden by RBAC gives a clear error and is not retried", opts, async () => {
  using admin = await testClient();
  const namespace = await testNamespace("rbac");
  await admin.api.create(SERVICEACCOUNTS, { metadata: { name: "limited" } }, { namespace });
  const request = await admin.http.json<{ status: { token: string } }>({
    method: "POST",
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/limited/token`,
    body: {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 600 },
    },
  });
  await using dir = await tempDir();
  const path = await kubeconfigWith(dir.path, { token: request.status.token });
  using client = new KubeClient(await loadKubeconfig({ paths: [path] }));
  const error = await client.api.list(CONFIGMAPS, { namespace: "kube-system" }).catch((e) => e);
  assert.ok(error instanceof ApiError);
  assert.equal(error.code, 403);
  assert.equal(error.reason, "Forbidden");
  assert.match(
    error.message,
    new RegExp(
      `^Forbidden \\(403\\): configmaps is forbidden: User "system:serviceaccount:${namespace}:limited" ` +
        `cannot list resource "configmaps" in API group "" in the namespace "kube-system" \\[GET /api/v1/namespaces/kube-system/configmaps`,
    ),
  );
  assert.equal(client.counters.count({ code: 403 }), 1, "4xx is never retried");
});

Deno.test("client certificates authenticate (mutual TLS)", opts, async () => {
  const plane = await sharedControlPlane();
  await using dir = await tempDir();
  const path = await kubeconfigWith(dir.path, {
    "client-certificate-data": btoa(plane.adminCertPem),
    "client-key-data": btoa(plane.adminKeyPem),
  });
  using client = new KubeClient(await loadKubeconfig({ paths: [path] }));
  const ns = await client.api.get({
    group: "",
    version: "v1",
    plural: "namespaces",
    namespaced: false,
  }, "default");
  assert.equal(ns.metadata?.name, "default");
});

Deno.test("bad configuration: one clear error line each", opts, async () => {
  const plane = await sharedControlPlane();
  await using dir = await tempDir();
  const oneLine = (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.equal(error.message.includes("\n"), false, `multi-line: ${error.message}`);
    return error.message;
  };
  // Missing kubeconfig.
  const missing = await KubeClient.connect({ kubeconfig: `${dir.path}/nope` }).catch((e) => e);
  assert.match(oneLine(missing), /nope/);
  assert.equal(missing.name, "ConfigError");

  // Broken kubeconfig (not YAML).
  await Deno.writeTextFile(`${dir.path}/broken`, "clusters: [\n  - {name: c, cluster: {server: ");
  const broken = await KubeClient.connect({ kubeconfig: `${dir.path}/broken` }).catch((e) => e);
  assert.match(oneLine(broken), /broken/);
  assert.equal(broken.name, "ConfigError");

  // Unreachable server.
  const unreachable = await kubeconfigWith(
    dir.path,
    { token: plane.adminToken },
    "https://127.0.0.1:1",
  );
  using c1 = new KubeClient(await loadKubeconfig({ paths: [unreachable] }), {
    retries: 1,
    backoff: { initialMs: 10 },
  });
  const refused = await c1.api.list(CONFIGMAPS, { namespace: "default" }).catch((e) => e);
  assert.ok(refused instanceof TransportError);
  assert.equal(refused.kind, "network");
  assert.match(oneLine(refused), /^Cannot reach the API server at https:\/\/127\.0\.0\.1:1: /);
  assert.equal(c1.counters.count({ code: 0 }), 2, "network errors are retried (here once)");

  // Wrong CA.
  const otherCa = await createCertificateAuthority();
  const wrongCa = await kubeconfigWith(
    dir.path,
    { token: plane.adminToken },
    undefined,
    otherCa.certPem,
  );
  using c2 = new KubeClient(await loadKubeconfig({ paths: [wrongCa] }));
  const untrusted = await c2.api.list(CONFIGMAPS, { namespace: "default" }).catch((e) => e);
  assert.ok(untrusted instanceof TransportError);
  assert.equal(untrusted.kind, "tls");
  assert.match(
    oneLine(untrusted),
    /^Cannot verify the TLS certificate of https:\/\/127\.0\.0\.1:\d+: .*check the CA in/,
  );
  assert.equal(c2.counters.count({ code: 0 }), 1, "TLS trust failures are not retried");

  // Wrong token.
  const badToken = await kubeconfigWith(dir.path, { token: "wrong" });
  using c3 = new KubeClient(await loadKubeconfig({ paths: [badToken] }));
  const unauthorized = await c3.api.list(CONFIGMAPS, { namespace: "default" }).catch((e) => e);
  assert.ok(unauthorized instanceof ApiError);
  assert.equal(unauthorized.code, 401);
  assert.match(oneLine(unauthorized), /^Unauthorized \(401\)/);
});

Deno.test(
  "Events of cluster-scoped objects go to the credentials' default namespace, named with " +
    "settings.posting.eventNamePrefix (AUTH-13, LOG-14, SUB-70, CFG-23)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const home = await testNamespace("home");
    await using dir = await tempDir();
    using admin = await testClient();
    const target = `${home}-target`;
    try {
      // The kubeconfig context names the operator's default namespace.
      const path = `${dir.path}/kubeconfig`;
      await Deno.writeTextFile(
        path,
        stringify({
          apiVersion: "v1",
          kind: "Config",
          clusters: [{
            name: "c",
            cluster: { server: plane.server, "certificate-authority-data": btoa(plane.caPem) },
          }],
          users: [{ name: "u", user: { token: plane.adminToken } }],
          contexts: [{ name: "ctx", context: { cluster: "c", user: "u", namespace: home } }],
          "current-context": "ctx",
        }),
      );
      const connection = await loadKubeconfig({ paths: [path] });
      assert.equal(connection.namespace, home);
      const settings = createSettings({ posting: { aggregationWindow: 0.2 } });
      settings.posting.eventNamePrefix = "custom-prefix-";
      settings.posting.loggers = true; // the Event comes from the log line of the handler
      await using op = await startOperator((registry) => {
        on.create("namespaces", { registry, labels: { "kopf-test": home } }, function greet() {
          return "hello";
        });
      }, { client: new KubeClient(connection), settings, namespaces: [home] });
      await op.ready;
      // A cluster-scoped object: a namespace of its own.
      await admin.api.create(NAMESPACES, {
        metadata: { name: target, labels: { "kopf-test": home } },
      });
      const events = await eventually(
        async () => {
          const list = await admin.api.list(EVENTS_RESOURCE, {
            namespace: home,
            fieldSelector: `involvedObject.name=${target}`,
          });
          return list.items.length ? list.items : undefined;
        },
        20_000,
        `an Event about ${target} in ${home}`,
      );
      for (const event of events) {
        assert.match(event.metadata?.name ?? "", /^custom-prefix-/);
        // The API server accepts it there only if the reference names that namespace (as Kopf's).
        const ref = event.involvedObject as { kind: string; name: string; namespace?: string };
        assert.deepEqual([ref.kind, ref.name, ref.namespace], ["Namespace", target, home]);
      }
      const elsewhere = await admin.api.list(EVENTS_RESOURCE, {
        namespace: "default",
        fieldSelector: `involvedObject.name=${target}`,
      });
      assert.equal(elsewhere.items.length, 0, "none in 'default'");
      // With `default` as the credentials' namespace, the reference stays without a namespace,
      // as `kubectl describe` of a cluster-scoped object looks for it.
      assert.equal(admin.http.connection.namespace ?? "default", "default");
      const posted = await postEvent(admin.api, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: target, uid: "u-1" },
      }, { type: "Normal", reason: "Testing", message: "in default" });
      assert.equal(posted.metadata?.namespace, "default");
      assert.equal((posted.involvedObject as { namespace?: string }).namespace, undefined);
      await admin.api.delete(EVENTS_RESOURCE, posted.metadata!.name!, { namespace: "default" });
    } finally {
      await admin.api.delete(NAMESPACES, target).catch(() => {});
    }
  },
);
