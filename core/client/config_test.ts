/**
 * Unit tests of where the client's configuration comes from: kubeconfig files (the server, TLS
 * material, token and namespace; the default ~/.kube/config; KUBECONFIG's files merged, the
 * first definition winning; relative paths), the in-cluster service account (its rotated token,
 * its errors), and `autoConfigure()`'s choice between them.
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { autoConfigure, loadInCluster, loadKubeconfig } from "./config.ts";
import {
  assertConfigError,
  CA,
  CERT,
  KEY,
  kubeconfig,
  withTempDir,
  write,
} from "./_config_test_support.ts";

const SA = "var/run/secrets/kubernetes.io/serviceaccount";

Deno.test("loadKubeconfig reads server, TLS material, token and namespace", async () => {
  await withTempDir(async (dir) => {
    const path = await write(
      dir,
      "config",
      kubeconfig(
        { server: "https://example.test:6443/", "certificate-authority-data": btoa(CA) },
        { token: "abc", "client-certificate-data": btoa(CERT), "client-key-data": btoa(KEY) },
        { namespace: "ns1" },
      ),
    );
    const info = await loadKubeconfig({ paths: [path], env: {} });
    assert.equal(info.server, "https://example.test:6443");
    assert.equal(info.caPem, CA);
    assert.equal(info.clientCertPem, CERT);
    assert.equal(info.clientKeyPem, KEY);
    assert.equal(info.namespace, "ns1");
    assert.equal(info.insecureSkipTlsVerify, undefined);
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer abc" });
    assert.equal(await info.credentials.invalidate(), false);
    assert.equal(info.source, `kubeconfig ${path}, context "main"`);
  });
});

Deno.test("loadKubeconfig: anonymous user, default namespace, insecure, scheme-less server", async () => {
  await withTempDir(async (dir) => {
    await write(
      dir,
      "config",
      kubeconfig({ server: "10.0.0.1:6443", "insecure-skip-tls-verify": true }),
    );
    const info = await loadKubeconfig({ env: { KUBECONFIG: join(dir, "config") } });
    assert.equal(info.server, "https://10.0.0.1:6443");
    assert.equal(info.namespace, "default");
    assert.equal(info.insecureSkipTlsVerify, true);
    assert.deepEqual(await info.credentials.headers(), {});
  });
});

Deno.test("loadKubeconfig reads ~/.kube/config by default", async () => {
  await withTempDir(async (home) => {
    await write(home, ".kube/config", kubeconfig({ server: "https://home.test" }));
    const info = await loadKubeconfig({ env: { HOME: home } });
    assert.equal(info.server, "https://home.test");
    assert.ok(info.source.includes(join(home, ".kube", "config")));
  });
});

Deno.test("loadKubeconfig merges KUBECONFIG files: first definition wins", async () => {
  await withTempDir(async (dir) => {
    const a = await write(dir, "a.yaml", {
      clusters: [{ name: "c1", cluster: { server: "https://a.test" } }],
      users: [{ name: "u1", user: { token: "token-a" } }],
      contexts: [{ name: "ctx-a", context: { cluster: "c1", user: "u1", namespace: "from-a" } }],
    });
    const b = await write(dir, "b.yaml", {
      "current-context": "ctx-b",
      clusters: [
        { name: "c1", cluster: { server: "https://b.test" } },
        { name: "c2", cluster: { server: "https://b2.test" } },
      ],
      users: [{ name: "u1", user: { token: "token-b" } }],
      contexts: [
        { name: "ctx-b", context: { cluster: "c1", user: "u1" } },
        { name: "ctx-a", context: { cluster: "c2" } },
      ],
    });
    const c = await write(dir, "c.yaml", { "current-context": "ctx-a" });
    const env = { KUBECONFIG: [a, join(dir, "missing.yaml"), b, c].join(":") };

    const info = await loadKubeconfig({ env });
    assert.equal(info.server, "https://a.test", "c1 comes from the first file");
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer token-a" });
    assert.equal(info.namespace, "default");
    assert.equal(info.source, `kubeconfig ${a}:${b}:${c}, context "ctx-b"`);

    const explicit = await loadKubeconfig({ env, context: "ctx-a" });
    assert.equal(explicit.namespace, "from-a", "ctx-a comes from the first file");
    assert.ok(explicit.source.endsWith(`context "ctx-a"`));

    const only = await loadKubeconfig({ env, paths: [b], context: "ctx-a" });
    assert.equal(only.server, "https://b2.test", "explicit paths replace KUBECONFIG");
  });
});

Deno.test("loadKubeconfig resolves relative file paths against the kubeconfig's directory", async () => {
  await withTempDir(async (dir) => {
    await write(dir, "conf/certs/ca.crt", CA);
    await write(dir, "conf/certs/client.crt", CERT);
    await write(dir, "conf/certs/client.key", KEY);
    const user = { "client-certificate": "certs/client.crt", "client-key": "certs/client.key" };
    await write(
      dir,
      "conf/config",
      kubeconfig({ server: "https://x.test", "certificate-authority": "certs/ca.crt" }, user),
    );
    const info = await loadKubeconfig({ paths: [join(dir, "conf/config")], env: {} });
    assert.equal(info.caPem, CA);
    assert.equal(info.clientCertPem, CERT);
    assert.equal(info.clientKeyPem, KEY);
  });
});

/** Writes a fake service account under `root`; `namespace: undefined` leaves its file out. */
async function serviceAccount(root: string, namespace: string | undefined = "ops"): Promise<void> {
  await write(root, `${SA}/ca.crt`, CA);
  await write(root, `${SA}/token`, "sa-token-1\n");
  if (namespace !== undefined) await write(root, `${SA}/namespace`, namespace);
}

Deno.test("loadInCluster reads the service account and re-reads the rotated token", async () => {
  await withTempDir(async (root) => {
    await serviceAccount(root);
    const env = { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" };
    const info = await loadInCluster({ root, env });
    assert.equal(info.server, "https://[fd00::1]:443");
    assert.equal(info.caPem, CA);
    assert.equal(info.namespace, "ops");
    assert.ok(info.source.includes(join(root, SA)));
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer sa-token-1" });
    await write(root, `${SA}/token`, "sa-token-2");
    assert.equal(await info.credentials.invalidate(), true);
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer sa-token-2" });

    await Deno.remove(join(root, SA, "namespace"));
    const v4 = await loadInCluster({
      root,
      env: { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "6443" },
    });
    assert.equal(v4.server, "https://10.96.0.1:6443");
    assert.equal(v4.namespace, "default");
  });
});

Deno.test("loadInCluster errors", async () => {
  await withTempDir(async (root) => {
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    await assertConfigError(loadInCluster({ root, env: {} }), "Not running inside a cluster");
    await assertConfigError(
      loadInCluster({ root, env }),
      "Cannot use the in-cluster service account token",
      join(root, SA, "token"),
      "does not exist",
    );
    await write(root, `${SA}/token`, "t");
    await assertConfigError(
      loadInCluster({ root, env }),
      "service account CA",
      join(root, SA, "ca.crt"),
      "does not exist",
    );
    await write(root, `${SA}/ca.crt`, CA);
    await assertConfigError(
      loadInCluster({ root, env: { ...env, KUBERNETES_SERVICE_PORT: "https" } }),
      "not a port",
    );
  });
});

Deno.test("autoConfigure picks explicit kubeconfig, then in-cluster, then kubeconfig", async () => {
  await withTempDir(async (dir) => {
    const root = join(dir, "root");
    const config = await write(dir, "config", kubeconfig({ server: "https://kubeconfig.test" }));
    const inCluster = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };

    const noToken = await autoConfigure({ root, env: { ...inCluster, KUBECONFIG: config } });
    assert.equal(noToken.server, "https://kubeconfig.test", "no token mounted: kubeconfig");
    await assertConfigError(
      autoConfigure({ root, env: { ...inCluster, HOME: dir } }),
      "No usable Kubernetes configuration",
      "in-cluster: Cannot use the in-cluster service account token",
      "kubeconfig: No kubeconfig found",
    );
    await assertConfigError(
      autoConfigure({ root, env: { HOME: dir } }),
      "in-cluster: KUBERNETES_SERVICE_HOST is unset",
      "kubeconfig: No kubeconfig found",
    );

    await serviceAccount(root);
    const pod = await autoConfigure({ root, env: { ...inCluster, KUBECONFIG: config } });
    assert.equal(pod.server, "https://10.96.0.1:443");
    const explicit = await autoConfigure({ root, env: inCluster, paths: [config] });
    assert.equal(explicit.server, "https://kubeconfig.test");
    const outside = await autoConfigure({ root, env: { KUBECONFIG: config } });
    assert.equal(outside.server, "https://kubeconfig.test");
    await assertConfigError(
      autoConfigure({ root, env: { ...inCluster, KUBECONFIG: config }, context: "nope" }),
      `Unknown context "nope"`,
    );
  });
});
