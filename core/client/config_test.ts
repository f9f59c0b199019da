import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import { autoConfigure, ConfigError, loadInCluster, loadKubeconfig } from "./config.ts";

const CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n";
const CERT = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n";
const KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n";
const PLUGIN = new URL("./testdata/exec_plugin.sh", import.meta.url).pathname;
const V1 = "client.authentication.k8s.io/v1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";
const SA = "var/run/secrets/kubernetes.io/serviceaccount";

type Json = Record<string, unknown>;

/** Runs a test body with a fresh temporary directory, removed afterwards. */
async function withTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kopf-config-test-" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Writes a text (or an object as YAML) under `dir`, creating directories; returns the path. */
async function write(dir: string, name: string, content: string | Json): Promise<string> {
  const path = join(dir, name);
  await Deno.mkdir(dirname(path), { recursive: true });
  await Deno.writeTextFile(path, typeof content === "string" ? content : stringify(content));
  return path;
}

/** A kubeconfig with one context "main" joining `cluster` and (if given) `user`. */
function kubeconfig(cluster: Json, user?: Json, context: Json = {}): Json {
  return {
    apiVersion: "v1",
    kind: "Config",
    "current-context": "main",
    clusters: [{ name: "c", cluster }],
    users: user ? [{ name: "u", user }] : [],
    contexts: [{
      name: "main",
      context: { cluster: "c", ...(user ? { user: "u" } : {}), ...context },
    }],
  };
}

/** Asserts that `promise` rejects with one ConfigError whose single-line message has `parts`. */
async function assertConfigError(promise: Promise<unknown>, ...parts: string[]): Promise<void> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${error}`);
  assert.equal(error.name, "ConfigError");
  assert.doesNotMatch(error.message, /\n/, "the message must be one line");
  assert.match(error.message, /^[A-Z]/, "the message must start with a capital letter");
  assert.doesNotMatch(error.message, /\.$/, "the message must not end with a period");
  for (const part of parts) {
    assert.ok(error.message.includes(part), `"${error.message}" lacks "${part}"`);
  }
}

/** A copy of the test plugin under `dir`, executable whatever mode git gave the original. */
async function installPlugin(dir: string, name = "bin/plugin.sh"): Promise<string> {
  const path = join(dir, name);
  await Deno.mkdir(dirname(path), { recursive: true });
  await Deno.copyFile(PLUGIN, path);
  await Deno.chmod(path, 0o755);
  return path;
}

/** How many times the test plugin ran with this state directory. */
async function runs(state: string): Promise<number> {
  return Number((await Deno.readTextFile(join(state, "count")).catch(() => "0")).trim());
}

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

Deno.test("tokenFile is re-read after invalidate() and every minute", async () => {
  await withTempDir(async (dir) => {
    let now = 1_000_000;
    await write(dir, "tokens/t", "one\n");
    await write(
      dir,
      "config",
      kubeconfig({ server: "https://x.test" }, { tokenFile: "tokens/t", token: "ignored" }),
    );
    const info = await loadKubeconfig({ paths: [join(dir, "config")], env: {}, now: () => now });
    const bearer = async () => (await info.credentials.headers()).Authorization;
    assert.equal(await bearer(), "Bearer one");
    await write(dir, "tokens/t", "two");
    assert.equal(await bearer(), "Bearer one", "cached within the minute");
    assert.equal(await info.credentials.invalidate(), true, "the token changed");
    assert.equal(await bearer(), "Bearer two");
    assert.equal(await info.credentials.invalidate(), false, "same token: retrying is pointless");
    await write(dir, "tokens/t", "three");
    now += 61_000;
    assert.equal(await bearer(), "Bearer three", "re-read after a minute");
    await Deno.remove(join(dir, "tokens/t"));
    now += 61_000;
    assert.equal(await bearer(), "Bearer three", "the last good token survives a missing file");
  });
});

Deno.test("username and password become a basic auth header", async () => {
  await withTempDir(async (dir) => {
    await write(
      dir,
      "config",
      kubeconfig({ server: "https://x.test" }, { username: "admin", password: "pässword" }),
    );
    const info = await loadKubeconfig({ paths: [join(dir, "config")], env: {} });
    const expected = btoa(String.fromCharCode(...new TextEncoder().encode("admin:pässword")));
    assert.deepEqual(await info.credentials.headers(), { Authorization: `Basic ${expected}` });
    assert.equal(await info.credentials.invalidate(), false);
  });
});

Deno.test("exec plugin v1: runs with exec info, caches until shortly before expiry", async () => {
  await withTempDir(async (dir) => {
    await installPlugin(dir);
    const state = join(dir, "state");
    await Deno.mkdir(state);
    const exec = {
      apiVersion: V1,
      command: "./bin/plugin.sh",
      args: ["--flag", "value"],
      env: [{ name: "TEST_PLUGIN_STATE", value: state }],
      interactiveMode: "Never",
      provideClusterInfo: true,
    };
    await write(
      dir,
      "config",
      kubeconfig({ server: "https://x.test", "certificate-authority-data": btoa(CA) }, { exec }),
    );
    let now = Date.parse("2099-12-31T00:00:00Z");
    const info = await loadKubeconfig({ paths: [join(dir, "config")], env: {}, now: () => now });
    assert.equal(await runs(state), 0, "the plugin runs on first use, not at load time");
    const bearer = async () => (await info.credentials.headers()).Authorization;

    assert.equal(await bearer(), "Bearer token-1");
    const execInfo = JSON.parse(await Deno.readTextFile(join(state, "exec_info")));
    assert.equal(execInfo.apiVersion, V1);
    assert.equal(execInfo.kind, "ExecCredential");
    assert.equal(execInfo.spec.interactive, false);
    assert.equal(execInfo.spec.cluster.server, "https://x.test");
    assert.equal(atob(execInfo.spec.cluster["certificate-authority-data"]), CA);
    assert.equal(await Deno.readTextFile(join(state, "args")), "--flag\nvalue\n");

    assert.equal(await bearer(), "Bearer token-1", "cached");
    assert.equal(await runs(state), 1);

    assert.equal(await info.credentials.invalidate(), true);
    const all = await Promise.all([bearer(), bearer(), bearer()]);
    assert.deepEqual(all, ["Bearer token-2", "Bearer token-2", "Bearer token-2"], "one shared run");
    assert.equal(await runs(state), 2);

    now = Date.parse("2100-01-01T00:00:00Z") - 5_000;
    assert.equal(await bearer(), "Bearer token-3", "refreshed shortly before expiry");

    await Deno.writeTextFile(join(state, "mode"), "expired");
    assert.equal(await info.credentials.invalidate(), true);
    assert.equal(await bearer(), "Bearer token-4");
    assert.equal(await bearer(), "Bearer token-5", "an expired token is not cached");

    await Deno.writeTextFile(join(state, "mode"), "fail");
    await assertConfigError(
      info.credentials.headers(),
      "exited with code 3",
      "you must be logged in",
    );
  });
});

Deno.test("exec plugin v1beta1: absolute command, no expiry, re-run after invalidate", async () => {
  await withTempDir(async (dir) => {
    const plugin = await installPlugin(dir);
    const state = join(dir, "state");
    await Deno.mkdir(state);
    const env = [{ name: "TEST_PLUGIN_STATE", value: state }, {
      name: "TEST_PLUGIN_MODE",
      value: "noexpiry",
    }];
    await write(
      dir,
      "config",
      kubeconfig({ server: "https://x.test" }, {
        exec: { apiVersion: V1BETA1, command: plugin, env },
      }),
    );
    const info = await loadKubeconfig({ paths: [join(dir, "config")], env: {} });
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer token-1" });
    const execInfo = JSON.parse(await Deno.readTextFile(join(state, "exec_info")));
    assert.deepEqual(execInfo, {
      apiVersion: V1BETA1,
      kind: "ExecCredential",
      spec: { interactive: false },
    });
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer token-1" });
    assert.equal(await info.credentials.invalidate(), true);
    assert.deepEqual(await info.credentials.headers(), { Authorization: "Bearer token-2" });
    assert.equal(await runs(state), 2);
  });
});

Deno.test("exec plugin failures are single-line ConfigErrors with the hint", async () => {
  await withTempDir(async (dir) => {
    await installPlugin(dir);
    const cases: Array<[mode: string, command: string, parts: string[]]> = [
      ["fail", "./bin/plugin.sh", ["exited with code 3", "fake-login", "Install fake-plugin"]],
      ["badjson", "./bin/plugin.sh", ['printed no JSON but "this is not JSON"']],
      ["cert", "./bin/plugin.sh", ["client certificate, which is not supported"]],
      ["ok", "./bin/missing.sh", [
        "was not found",
        join(dir, "bin/missing.sh"),
        "Install fake-plugin",
      ]],
    ];
    for (const [mode, command, parts] of cases) {
      const state = await Deno.makeTempDir({ dir });
      const env = [{ name: "TEST_PLUGIN_STATE", value: state }, {
        name: "TEST_PLUGIN_MODE",
        value: mode,
      }];
      const exec = {
        apiVersion: V1,
        command,
        env,
        installHint: "Install fake-plugin\nfrom the docs",
      };
      const path = await write(
        dir,
        `config-${mode}`,
        kubeconfig({ server: "https://x.test" }, { exec }),
      );
      const info = await loadKubeconfig({ paths: [path], env: {} });
      await assertConfigError(
        info.credentials.headers(),
        `Exec plugin`,
        `user "u" in ${path}`,
        ...parts,
      );
    }
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

/** Bad kubeconfigs: file contents (YAML text or an object), options, expected message parts. */
const BAD: Array<
  [title: string, content: string | Json, context: string | undefined, parts: string[]]
> = [
  ["malformed YAML", "clusters: [\n  - name: c\n", undefined, ["invalid YAML", "line"]],
  ["top level not a mapping", "- a\n- b\n", undefined, ["the top level is not a mapping"]],
  ["clusters not a list", { clusters: { c: 1 } }, undefined, ["clusters is not a list"]],
  [
    "missing CA file",
    kubeconfig({ server: "https://x", "certificate-authority": "nope.crt" }),
    undefined,
    ["certificate-authority", "nope.crt that does not exist"],
  ],
  ["unknown context", kubeconfig({ server: "https://x" }), "nope", [
    `Unknown context "nope"`,
    `defined contexts: "main"`,
  ]],
  ["no current context", { clusters: [], contexts: [] }, undefined, ["current-context is not set"]],
  [
    "context without cluster",
    { "current-context": "x", contexts: [{ name: "x", context: {} }] },
    undefined,
    [`context "x" names no cluster`],
  ],
  [
    "undefined cluster",
    { "current-context": "x", contexts: [{ name: "x", context: { cluster: "ghost" } }] },
    undefined,
    [`names cluster "ghost" which is not defined`],
  ],
  ["cluster without server", kubeconfig({}), undefined, [`cluster "c" has no server`]],
  ["invalid server", kubeconfig({ server: "https://" }), undefined, ["invalid server URL"]],
  ["non-http server", kubeconfig({ server: "ftp://x" }), undefined, ["not http(s)"]],
  [
    "undefined user",
    { ...kubeconfig({ server: "https://x" }, { token: "t" }), users: [] },
    undefined,
    [`names user "u" which is not defined`],
  ],
  [
    "user entry not a mapping",
    { ...kubeconfig({ server: "https://x" }, {}), users: [{ name: "u", user: "oops" }] },
    undefined,
    [`user "u" is not a mapping`],
  ],
  [
    "users item not a mapping",
    { ...kubeconfig({ server: "https://x" }), users: ["oops"] },
    undefined,
    ["users[0] is not a mapping"],
  ],
  [
    "item without name",
    { ...kubeconfig({ server: "https://x" }), users: [{ user: {} }] },
    undefined,
    ["users[0] has no name"],
  ],
  [
    "bad base64",
    kubeconfig({ server: "https://x", "certificate-authority-data": "%%%" }),
    undefined,
    ["not valid base64"],
  ],
  [
    "CA not PEM",
    kubeconfig({ server: "https://x", "certificate-authority-data": btoa("hello") }),
    undefined,
    ["that is not PEM"],
  ],
  ["missing token file", kubeconfig({ server: "https://x" }, { tokenFile: "gone" }), undefined, [
    `Cannot use the tokenFile of user "u"`,
    "gone does not exist",
  ]],
  [
    "password not a string",
    kubeconfig({ server: "https://x" }, { username: "a", password: 1234 }),
    undefined,
    ["password that is not a string"],
  ],
  [
    "token and basic",
    kubeconfig({ server: "https://x" }, { token: "t", username: "a", password: "b" }),
    undefined,
    ["both a token and a username/password"],
  ],
  [
    "certificate without key",
    kubeconfig({ server: "https://x" }, { "client-certificate-data": btoa(CERT) }),
    undefined,
    ["needs both client-certificate and client-key"],
  ],
  [
    "auth-provider",
    kubeconfig({ server: "https://x" }, { "auth-provider": { name: "oidc" } }),
    undefined,
    [`auth-provider "oidc"`, "exec credential plugin"],
  ],
  ["exec not a mapping", kubeconfig({ server: "https://x" }, { exec: "kubelogin" }), undefined, [
    "exec is not a mapping",
  ]],
  [
    "exec v1alpha1",
    kubeconfig({ server: "https://x" }, {
      exec: { apiVersion: "client.authentication.k8s.io/v1alpha1", command: "x" },
    }),
    undefined,
    ["Unsupported", "v1alpha1"],
  ],
  [
    "exec without command",
    kubeconfig({ server: "https://x" }, { exec: { apiVersion: V1 } }),
    undefined,
    ["exec has no command"],
  ],
  [
    "exec interactive",
    kubeconfig({ server: "https://x" }, {
      exec: { apiVersion: V1, command: "x", interactiveMode: "Always" },
    }),
    undefined,
    ["interactiveMode Always"],
  ],
  [
    "exec env malformed",
    kubeconfig({ server: "https://x" }, {
      exec: { apiVersion: V1, command: "x", env: [{ name: "A" }] },
    }),
    undefined,
    ["env has an entry"],
  ],
];

for (const [title, content, context, parts] of BAD) {
  Deno.test(`loadKubeconfig rejects a bad kubeconfig: ${title}`, async () => {
    await withTempDir(async (dir) => {
      const path = await write(dir, "config", content);
      const options = { paths: [path], env: {}, ...(context ? { context } : {}) };
      await assertConfigError(loadKubeconfig(options), ...parts);
    });
  });
}

Deno.test("loadKubeconfig without any kubeconfig file", async () => {
  await withTempDir(async (dir) => {
    await assertConfigError(
      loadKubeconfig({ env: { HOME: dir } }),
      "No kubeconfig found: KUBECONFIG is unset and",
      join(dir, ".kube", "config"),
      "set KUBECONFIG or run inside a cluster",
    );
    const list = `${join(dir, "a")}:${join(dir, "b")}`;
    await assertConfigError(
      loadKubeconfig({ env: { KUBECONFIG: list } }),
      "none of the files exist",
      list,
    );
    await assertConfigError(loadKubeconfig({ env: {} }), "KUBECONFIG and HOME are unset");
  });
});

Deno.test("loadKubeconfig refuses proxy-url with a message naming the field and HTTPS_PROXY", async () => {
  await withTempDir(async (dir) => {
    const path = await write(
      dir,
      "config",
      kubeconfig({ server: "https://10.0.0.1:6443", "proxy-url": "http://proxy.test:3128" }),
    );
    await assert.rejects(
      () => loadKubeconfig({ paths: [path] }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.includes(path) &&
        error.message.includes('cluster "c" sets proxy-url, which is not supported') &&
        error.message.includes("HTTPS_PROXY=http://proxy.test:3128") &&
        !error.message.includes("\n"),
    );
    // An empty proxy-url is no proxy.
    await write(dir, "config", kubeconfig({ server: "https://10.0.0.1:6443", "proxy-url": "" }));
    assert.equal((await loadKubeconfig({ paths: [path] })).server, "https://10.0.0.1:6443");
  });
});

Deno.test("loadKubeconfig warns once about insecure-skip-tls-verify: true, not otherwise", async () => {
  await withTempDir(async (dir) => {
    const warnings: string[] = [];
    const warn = (message: string) => warnings.push(message);
    const insecure = await write(
      dir,
      "insecure",
      kubeconfig({ server: "https://10.0.0.1:6443", "insecure-skip-tls-verify": true }),
    );
    await loadKubeconfig({ paths: [insecure], warn });
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]!,
      /cluster "c" sets insecure-skip-tls-verify: the API server's certificate is not verified/,
    );
    assert.ok(warnings[0]!.includes(insecure));
    for (const flag of [false, undefined]) {
      const path = await write(
        dir,
        `secure-${flag}`,
        kubeconfig({ server: "https://10.0.0.1:6443", "insecure-skip-tls-verify": flag }),
      );
      await loadKubeconfig({ paths: [path], warn });
    }
    assert.equal(warnings.length, 1);
  });
});

Deno.test("loadKubeconfig refuses insecure-skip-tls-verify with a proxy in the environment, naming the alternatives", async () => {
  await withTempDir(async (dir) => {
    const path = await write(
      dir,
      "config",
      kubeconfig({ server: "https://10.0.0.1:6443", "insecure-skip-tls-verify": true }),
    );
    await assert.rejects(
      () => loadKubeconfig({ paths: [path], env: { HTTPS_PROXY: "http://proxy.test:3128" } }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.includes(path) &&
        error.message.includes(
          'cluster "c" sets insecure-skip-tls-verify, which cannot be honoured through the ' +
            "proxy in HTTPS_PROXY",
        ) &&
        error.message.includes("certificate-authority(-data)") &&
        error.message.includes("--unsafely-ignore-certificate-errors=10.0.0.1") &&
        !error.message.includes("\n"),
    );
    // Without a proxy, it is obeyed (with the warning).
    const warnings: string[] = [];
    await loadKubeconfig({ paths: [path], env: {}, warn: (m) => warnings.push(m) });
    assert.equal(warnings.length, 1);
  });
});
