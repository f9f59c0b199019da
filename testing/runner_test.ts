import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { createTestNamespace, sharedControlPlane } from "./control_plane.ts";
import { KopfRunner } from "./runner.ts";
import { parse } from "yaml";

const plane = await sharedControlPlane();
const opts = { sanitizeOps: false, sanitizeResources: false };
const KEX = { group: "kopf.dev", version: "v1", plural: "kopfexamples", namespaced: true };

async function client(): Promise<KubeClient> {
  const c = new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
  await c.api.create(CRD_RESOURCE, parse(await Deno.readTextFile("crds/example.yaml")) as never)
    .catch(() => {});
  for (let i = 0; i < 100; i++) {
    const crd = await c.api.get(CRD_RESOURCE, "kopfexamples.kopf.dev");
    const conditions =
      (crd.status as { conditions?: Array<{ type: string; status: string }> })?.conditions ?? [];
    if (conditions.some((x) => x.type === "Established" && x.status === "True")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return c;
}

async function statusOf(c: KubeClient, name: string, namespace: string): Promise<unknown> {
  for (let i = 0; i < 150; i++) {
    const obj = await c.api.get(KEX, name, { namespace });
    if (obj.status) return obj.status;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no status");
}

Deno.test(
  "KopfRunner runs `kopf run` in-process with captured output and exit code",
  opts,
  async () => {
    using c = await client();
    const namespace = await createTestNamespace(plane, "runner");
    const runner = KopfRunner.start([
      "run",
      "--verbose",
      "-n",
      namespace,
      "examples/01-minimal/example.ts",
    ], {
      kubeconfig: plane.kubeconfigPath,
    });
    await runner.ready;
    await c.api.create(KEX, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "r1" },
      spec: {},
    }, {
      namespace,
    });
    assert.deepEqual(await statusOf(c, "r1", namespace), { create_fn: { message: "hello world" } });
    await runner.waitFor(/Handler 'create_fn' succeeded/);
    await runner.stop();
    assert.equal(await runner.exited, 0);
    assert.equal(runner.exitCode, 0);
    assert.equal(runner.error, undefined);
    assert.match(runner.output, /And here we are! Created with spec/);
    // The logs are standard error's, as on a terminal; nothing went to standard output.
    assert.equal(runner.stderr, runner.output);
    assert.equal(runner.stdout, "");
  },
);

Deno.test(
  "KopfRunner separates standard output from standard error (stdout, stderr, their bytes) and resolves exited with the exit code (TEST-03)",
  opts,
  async () => {
    const version = KopfRunner.start(["--version"]);
    assert.equal(await version.exited, 0);
    assert.match(version.stdout, /^kopf, version \S+$/);
    assert.deepEqual(version.stdoutBytes, new TextEncoder().encode(version.stdout));
    assert.equal(version.stderr, "");
    assert.equal(version.output, version.stdout);
    const wrong = KopfRunner.start(["run", "--no-such-option"]);
    assert.equal(await wrong.exited, 1);
    assert.equal(wrong.stdout, "");
    assert.match(wrong.stderr, /^error: .*no-such-option.*\(see kopf run --help\)$/);
    assert.deepEqual(wrong.stderrBytes, new TextEncoder().encode(wrong.stderr));
    const usage = KopfRunner.start(["run", "--help"]);
    assert.equal(await usage.exited, 0);
    assert.match(usage.stdout, /--namespace/);
    assert.equal(usage.stderr, "");
  },
);

Deno.test(
  "KopfRunner reports a module that cannot be loaded as exit code 1 with one error line",
  opts,
  async () => {
    await using runner = KopfRunner.start(["run", "examples/does-not-exist.ts"], {
      kubeconfig: plane.kubeconfigPath,
    });
    await assert.rejects(runner.ready, /exited before it was ready/);
    assert.equal(runner.exitCode, 1);
    assert.deepEqual(runner.lines, [
      "error: Cannot load handlers from examples/does-not-exist.ts: No such file: examples/does-not-exist.ts",
    ]);
    assert.equal(runner.stderr, runner.lines[0]);
  },
);

Deno.test(
  "KopfRunner.fromOptions runs a registry and captures object log lines",
  opts,
  async () => {
    using c = await client();
    const namespace = await createTestNamespace(plane, "runner2");
    const registry = new OperatorRegistry();
    on.create("kopfexamples", { registry }, function hello({ logger }) {
      logger.info("hello from the registry");
      return 1;
    });
    await using runner = KopfRunner.fromOptions({
      registry,
      namespaces: [namespace],
      client: new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] })),
      standalone: true,
    });
    await runner.ready;
    await c.api.create(KEX, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "r2" },
      spec: {},
    }, {
      namespace,
    });
    const line = await runner.waitFor(/hello from the registry/);
    assert.equal(line, `INFO [${namespace}/r2] hello from the registry`);
    assert.ok(runner.stderr.split("\n").includes(line), "log lines are standard error's");
  },
);

Deno.test(
  "KopfRunner rethrows the error that ended the operator on stop, unless reraise is false (TEST-01)",
  opts,
  async () => {
    const failing = () => {
      const registry = new OperatorRegistry();
      on.login({ registry }, function nothing() {
        return null; // no credentials: the operator fails with a LoginError
      });
      return registry;
    };
    const namespace = await createTestNamespace(plane, "runner3");
    const reraising = KopfRunner.fromOptions({
      registry: failing(),
      namespaces: [namespace],
      standalone: true,
    });
    await assert.rejects(reraising.ready, /exited before it was ready/);
    await assert.rejects(reraising.stop(), { name: "LoginError" });

    const quiet = KopfRunner.fromOptions({
      registry: failing(),
      namespaces: [namespace],
      standalone: true,
    }, { reraise: false });
    await assert.rejects(quiet.ready);
    await quiet.stop();
    assert.equal((quiet.error as Error).name, "LoginError");
    assert.equal(quiet.exitCode, 1);
  },
);

Deno.test(
  "KopfRunner.stop() gives up after stopTimeoutMs when the operator does not exit (TEST-01)",
  opts,
  async () => {
    const namespace = await createTestNamespace(plane, "runner4");
    const registry = new OperatorRegistry();
    on.cleanup({ registry }, async function hang({ signal }) {
      // Ends only when the grace period aborts it: the exit takes that long.
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    });
    const runner = KopfRunner.fromOptions({
      registry,
      namespaces: [namespace],
      client: new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] })),
      standalone: true,
    }, { stopTimeoutMs: 200 });
    await runner.ready;
    await assert.rejects(runner.stop(), /did not exit within 200 ms/);
    assert.equal(runner.exitCode, undefined);
    // It still exits by itself once the cleanup's grace period is over.
    for (let i = 0; i < 200 && runner.exitCode === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(runner.exitCode, 0);
  },
);
