/**
 * How operators start and end, as docs/parity.md lists it against Kopf's documentation: the
 * readiness of embedded operators and their graceful exit on signals (EMB-12), `kopf run -n/-A`
 * (CLI-03) and Ctrl-C twice (CLI-11), and the exit after a fatal error in a watch stream
 * (HIST-22). In-process operators and `kopf run` subprocesses, against the real control plane.
 */

import assert from "node:assert/strict";
import { start } from "../core/api/embedding.ts";
import { on } from "../core/api/on.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { spawnDeno, spawnOperator } from "./_operator.ts";
import { runOperator, within } from "./_parity.ts";
import {
  CONFIGMAPS,
  eventually,
  kubeconfigPath,
  sleep,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A file written for one test; removed with its temporary folder on disposal. */
interface Written extends AsyncDisposable {
  /** The file's path. */
  readonly path: string;
}

/**
 * Writes a handlers file for `kopf run` (or a script that embeds an operator) into a fresh
 * temporary folder: an import of `names` from the project's mod.ts, then `body`.
 */
async function written(names: string, body: string): Promise<Written> {
  const dir = await tempDir();
  const mod = new URL("../mod.ts", import.meta.url).href;
  const path = `${dir.path}/main.ts`;
  await Deno.writeTextFile(path, `import { ${names} } from "${mod}";\n` + body);
  return { path, [Symbol.asyncDispose]: () => dir[Symbol.asyncDispose]() };
}

// ---------------------------------------------------------------------------------------------
// EMB-12: readiness and signals of embedded operators.

Deno.test(
  "start(): ready resolves only after the startup handlers finished, with the root tasks up: the liveness endpoint answers at once (EMB-12)",
  opts,
  async () => {
    const namespace = await testNamespace("emb12");
    const gate = Promise.withResolvers<void>();
    const order: string[] = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, async function slow() {
      order.push("startup begun");
      await gate.promise;
      order.push("startup done");
    });
    on.event("configmaps", { registry }, () => {});
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    await using running = start({
      registry,
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
      standalone: true,
      settings: createSettings(),
      liveness: url,
    });
    running.ready.then(() => order.push("ready"));
    await eventually(() => order.includes("startup begun"), 10_000, "the startup handler");
    await sleep(1_000);
    assert.deepEqual(order, ["startup begun"], "not ready while a startup handler runs");
    await assert.rejects(fetch(url), "no liveness endpoint before the startup is over");
    gate.resolve();
    await within(running.ready, 30_000, "readiness");
    assert.deepEqual(order, ["startup begun", "startup done", "ready"]);
    const response = await fetch(url);
    assert.equal(response.status, 200);
    await response.body?.cancel();
  },
);

Deno.test(
  "run(): SIGINT or SIGTERM, during the startup or once running, starts a graceful exit — the cleanup handlers run, run() returns, the process exits 0 (EMB-12)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("emb12sig");
    await client.api.create(CONFIGMAPS, { metadata: { name: "cm" } }, { namespace });
    await using script = await written(
      "configureLogging, createSettings, on, run",
      `configureLogging({ format: "plain" });\n` +
        `const settings = createSettings();\n` +
        `settings.process.gracePeriod = 600; // an upper bound only: nothing needs it here\n` +
        `on.startup(function started() { console.error("operator started"); });\n` +
        `on.cleanup(function finished() { console.error("cleanup ran"); });\n` +
        `on.event("configmaps", function seen({ name }) { console.error(\`seen \${name}\`); });\n` +
        `await run({ settings, namespaces: ["${namespace}"], standalone: true });\n` +
        `console.error("run() returned");\n`,
    );
    const cases = [
      { signal: "SIGINT", when: /^operator started$/ }, // while starting up
      { signal: "SIGINT", when: /^seen cm$/ }, // while serving
      { signal: "SIGTERM", when: /^seen cm$/ },
    ] as const;
    for (const { signal, when } of cases) {
      // The script lives outside the project: give it the project's import map.
      const op = await spawnDeno(["--config", "deno.json", script.path]);
      try {
        await op.waitForLine(when);
        op.kill(signal);
        // No timer of the stop sequence keeps the process alive (a grace period of 600 s would).
        const code = await within(op.exited, 20_000, `the exit after ${signal}`);
        const output = `${signal} after ${when}:\n${op.lines.join("\n")}`;
        assert.equal(code, 0, output);
        assert.ok(op.lines.includes("cleanup ran"), output);
        assert.ok(op.lines.includes("run() returned"), output);
      } finally {
        await op.stop();
      }
    }
  },
);

// ---------------------------------------------------------------------------------------------
// CLI-03, CLI-11: kopf run options and signals.

Deno.test(
  "kopf run -n (repeatable, with glob patterns) serves the matching namespaces only; -A serves the whole cluster with cluster-wide watches (CLI-03)",
  opts,
  async () => {
    using client = await testClient();
    const token = crypto.randomUUID().slice(0, 6);
    const literal = await testNamespace(`c3${token}-lit`);
    const globbed = await testNamespace(`c3${token}-glob`);
    const other = await testNamespace(`c3${token}-off`);
    await using handlers = await written(
      "on",
      // Only this test's ConfigMaps, even when watching the whole cluster.
      `on.startup(function only({ settings }) {\n` +
        `  settings.watching.labelSelectors = { configmaps: "cli03=${token}" };\n` +
        `});\n` +
        `on.create("configmaps", function seen({ namespace, name }) {\n` +
        `  console.error(\`seen \${namespace}/\${name}\`);\n` +
        `});\n`,
    );
    const configmap = { metadata: { name: "cm", labels: { cli03: token } } };
    const common = [handlers.path, "--standalone", "-v", "--log-format", "plain"];
    const namespaced = await spawnOperator([
      ...common,
      "-n",
      literal,
      "--namespace",
      `c3${token}-glob-*`,
    ]);
    try {
      await namespaced.waitForLine(new RegExp(`^Watching configmaps\\.v1 in ${literal}$`));
      await namespaced.waitForLine(new RegExp(`^Watching configmaps\\.v1 in ${globbed}$`));
      for (const namespace of [other, literal, globbed]) {
        await client.api.create(CONFIGMAPS, configmap, { namespace });
      }
      await namespaced.waitForLine(new RegExp(`^seen ${literal}/cm$`));
      await namespaced.waitForLine(new RegExp(`^seen ${globbed}/cm$`));
      await sleep(1_000);
      const output = namespaced.lines.join("\n");
      assert.ok(!output.includes(`seen ${other}/cm`), output);
      assert.ok(!output.includes(`in ${other}`), output);
    } finally {
      assert.equal(await namespaced.stop(), 0);
    }
    const clusterwide = await spawnOperator([...common, "-A"]);
    try {
      await clusterwide.waitForLine(/^Watching configmaps\.v1$/);
      // The object the namespaced operator did not serve is handled now; the others were.
      await clusterwide.waitForLine(new RegExp(`^seen ${other}/cm$`));
      await sleep(1_000);
      const output = clusterwide.lines.join("\n");
      assert.ok(!output.includes(`seen ${literal}/cm`), output);
      assert.ok(!/^Watching configmaps\.v1 in /m.test(output), output);
    } finally {
      assert.equal(await clusterwide.stop(), 0);
    }
  },
);

Deno.test(
  "kopf run: a second SIGINT (Ctrl-C twice) while the graceful exit waits exits at once with 130 (CLI-11)",
  opts,
  async () => {
    const namespace = await testNamespace("cli11");
    await using handlers = await written(
      "on",
      `on.startup(function started() { console.error("operator started"); });\n` +
        `on.cleanup(async function hang() {\n` +
        `  console.error("cleanup started");\n` +
        `  await new Promise(() => {}); // never settles: the graceful exit waits\n` +
        `});\n` +
        `on.event("configmaps", function seen() {});\n`,
    );
    const op = await spawnOperator([
      handlers.path,
      "-n",
      namespace,
      "--standalone",
      "--log-format",
      "plain",
    ]);
    try {
      await op.waitForLine(/operator started/);
      await op.waitForLine(/Initial authentication has finished/);
      op.kill("SIGINT");
      await op.waitForLine(/cleanup started/);
      op.kill("SIGINT");
      // Without the second signal, the exit would wait for the 600 s ultimate timeout.
      const code = await within(op.exited, 15_000, "the exit after the second SIGINT");
      assert.equal(code, 130, op.lines.join("\n"));
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// HIST-22: the exit after a fatal error in watching.

Deno.test(
  "an unexpected error that breaks a watch stream ends the operator, not freezes it: the cleanup runs, operator() rejects, kopf run exits 1 (HIST-22)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("hist22");
    // Index handlers run on the stream itself: a filter callback that throws breaks it.
    const poison = { metadata: { name: "poison" } };

    let cleaned = false;
    const registry = new OperatorRegistry();
    on.index("configmaps", {
      registry,
      when: ({ name }) => {
        if (name === "poison") throw new Error("a filter that breaks the stream");
        return true;
      },
    }, function names({ name }) {
      return { [name]: true };
    });
    on.cleanup({ registry }, function cleanup() {
      cleaned = true;
    });
    const op = runOperator(registry, {
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
    });
    try {
      await op.ready;
      await client.api.create(CONFIGMAPS, poison, { namespace });
      const error = await within(op.done, 30_000, "the operator to end");
      assert.match(String(error), /a filter that breaks the stream/);
      assert.ok(cleaned, "the cleanup handlers ran");
      assert.ok(
        op.logs.some((e) =>
          e.level === "error" && /^The operator stops after a fatal error: a filter/.test(e.message)
        ),
        op.logs.map((e) => e.message).join("\n"),
      );
    } finally {
      await op.stop().catch(() => {});
    }

    const other = await testNamespace("hist22cli");
    await client.api.create(CONFIGMAPS, poison, { namespace: other });
    await using handlers = await written(
      "on",
      `on.index("configmaps", { when: ({ name }) => {\n` +
        `  if (name === "poison") throw new Error("a filter that breaks the stream");\n` +
        `  return true;\n` +
        `} }, function names({ name }) { return { [name]: true }; });\n` +
        `on.cleanup(function cleanup() { console.error("cleanup ran"); });\n`,
    );
    const cli = await spawnOperator([
      handlers.path,
      "-n",
      other,
      "--standalone",
      "--log-format",
      "plain",
    ]);
    try {
      const code = await within(cli.exited, 30_000, "kopf run to exit");
      const output = cli.lines.join("\n");
      assert.equal(code, 1, output);
      assert.ok(cli.lines.includes("cleanup ran"), output);
      assert.match(output, /a filter that breaks the stream/);
    } finally {
      await cli.stop();
    }
  },
);
