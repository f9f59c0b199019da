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
  testClient,
  testNamespace,
} from "./_support.ts";

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
