/**
 * Unit tests of the kubeconfigs the client refuses or warns about: malformed files and entries
 * (each refused with one single-line `ConfigError` naming what is wrong), no kubeconfig at all,
 * `proxy-url`, and `insecure-skip-tls-verify` (a warning, or a refusal with a proxy in the
 * environment).
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ConfigError, loadKubeconfig } from "./config.ts";
import {
  assertConfigError,
  CERT,
  type Json,
  kubeconfig,
  V1,
  withTempDir,
  write,
} from "./_config_test_support.ts";

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
