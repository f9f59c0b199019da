/**
 * Unit tests of the credentials a kubeconfig's user gives: a tokenFile (re-read after
 * `invalidate()` and every minute), username and password (basic auth), and exec credential
 * plugins v1 and v1beta1 (run with the exec info on first use, cached until shortly before
 * expiry, one shared run, failures as single-line `ConfigError`s with the install hint), with
 * the fake plugin in testdata/exec_plugin.sh.
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { loadKubeconfig } from "./config.ts";
import {
  assertConfigError,
  CA,
  kubeconfig,
  V1,
  withTempDir,
  write,
} from "./_config_test_support.ts";

const PLUGIN = new URL("./testdata/exec_plugin.sh", import.meta.url).pathname;
const V1BETA1 = "client.authentication.k8s.io/v1beta1";

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
