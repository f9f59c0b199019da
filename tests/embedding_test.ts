/**
 * Embedding: several operators in one process with separate registries, each with its own
 * readiness and clean stop.
 */

import assert from "node:assert/strict";
import { start } from "../core/api/embedding.ts";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import { spawnDeno } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "two embedded operators with separate registries serve their own namespaces (EMB-*)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const [nsA, nsB] = [await testNamespace("emb-a"), await testNamespace("emb-b")];
    const a = new OperatorRegistry();
    const b = new OperatorRegistry();
    on.create("kopfexamples", { registry: a }, function who() {
      return "a";
    });
    on.create("kopfexamples", { registry: b }, function who() {
      return "b";
    });
    const connection = await loadKubeconfig({ paths: [await kubeconfigPath()] });
    {
      await using first = start({
        registry: a,
        namespaces: [nsA],
        client: new KubeClient(connection),
        standalone: true,
        settings: createSettings(),
      });
      await using second = start({
        registry: b,
        namespaces: [nsB],
        client: new KubeClient(connection),
        standalone: true,
        settings: createSettings(),
      });
      await Promise.all([first.ready, second.ready]);
      for (const ns of [nsA, nsB]) {
        await client.api.create(KOPFEXAMPLES, {
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          metadata: { name: "o" },
        }, {
          namespace: ns,
        });
      }
      const who = async (ns: string) =>
        await eventually(async () =>
          ((await client.api.get(KOPFEXAMPLES, "o", { namespace: ns })).status as { who?: string })
            ?.who
        );
      assert.equal(await who(nsA), "a");
      assert.equal(await who(nsB), "b");
    }
    // Both stopped when leaving the scope: a new object stays unhandled.
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "late" },
    }, {
      namespace: nsA,
    });
    await new Promise((r) => setTimeout(r, 800));
    const late = await client.api.get(KOPFEXAMPLES, "late", { namespace: nsA });
    assert.equal(late.status, undefined);
  },
);

Deno.test(
  "run(): SIGTERM with a cleanup handler that never returns ends the process after the ultimate exiting timeout (CFG-10, EMB-01)",
  { sanitizeOps: false, sanitizeResources: false },
  async () => {
    const namespace = await testNamespace("emb-exit");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/main.ts`,
      `import { configureLogging, createSettings, on, run } from "${mod}";\n` +
        `configureLogging({ format: "plain" });\n` +
        `const settings = createSettings();\n` +
        `settings.process.ultimateExitingTimeout = 1;\n` +
        `on.startup(function ready() { console.error("operator ready"); });\n` +
        `on.cleanup(async function hang() {\n` +
        `  console.error("cleanup started");\n` +
        `  await new Promise(() => {}); // never settles, ignores its signal\n` +
        `});\n` +
        `on.event("configmaps", function seen() {});\n` +
        `await run({ settings, namespaces: ["${namespace}"], standalone: true });\n`,
    );
    // The script lives outside the project: give it the project's import map.
    const op = await spawnDeno(["--config", "deno.json", `${dir.path}/main.ts`]);
    await op.waitForLine(/operator ready/);
    const code = await op.stop(); // SIGTERM; SIGKILL (137) only after 15 s
    assert.ok(op.lines.includes("cleanup started"), op.lines.join("\n"));
    assert.equal(code, 1, op.lines.join("\n"));
    assert.ok(
      op.lines.some((l) => /did not finish within 1 s .*exiting forcefully/.test(l)),
      op.lines.join("\n"),
    );
  },
);

Deno.test(
  "embedded operators serve namespaces given as regular expressions or the legacy singular namespace (SCP-11, DEPR-11)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const [nsA, nsB] = [await testNamespace("emb-re"), await testNamespace("emb-one")];
    const registry = new OperatorRegistry();
    on.create("kopfexamples", { registry }, function seen() {
      return "seen";
    });
    const connection = await loadKubeconfig({ paths: [await kubeconfigPath()] });
    const escaped = nsA.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    {
      // The expression must match whole names: the `x` suffix keeps nsA itself out of the first.
      await using byRegExp = start({
        registry,
        namespaces: [new RegExp(`${escaped}x?`)],
        client: new KubeClient(connection),
        standalone: true,
        settings: createSettings(),
      });
      await using bySingular = start({
        registry,
        namespace: nsB,
        client: new KubeClient(connection),
        standalone: true,
        settings: createSettings(),
      });
      await Promise.all([byRegExp.ready, bySingular.ready]);
      for (const ns of [nsA, nsB]) {
        await client.api.create(KOPFEXAMPLES, {
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          metadata: { name: "o" },
        }, { namespace: ns });
      }
      for (const ns of [nsA, nsB]) {
        const status = await eventually(async () =>
          ((await client.api.get(KOPFEXAMPLES, "o", { namespace: ns })).status as {
            seen?: string;
          })?.seen
        );
        assert.equal(status, "seen", ns);
      }
    }
    await assert.rejects(
      () => start({ registry, namespace: nsA, namespaces: [nsB] }).done,
      /Either namespaces or namespace/,
    );
  },
);
